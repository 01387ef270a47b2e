package harness

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// An arm request names when the harness stops waiting for it, less the
// answer's margin, so a node stopped meanwhile refuses it when it resumes
// instead of arming a failpoint the fault recorded as failed. Other admin
// requests carry no deadline: a late disarm or release does no harm.
func TestAdminRequestArmDeadline(t *testing.T) {
	deadline := time.Now().Add(5 * time.Second)
	want := strconv.FormatInt(deadline.Add(-armAnswerMargin).UnixNano(), 10)
	tests := []struct {
		name         string
		method, path string
		noDeadline   bool
		want         string
	}{
		{"arm with PUT", http.MethodPut, "/failpoints/controller-before-broker-change", false, want},
		{"arm with POST", http.MethodPost, "/failpoints/controller-after-zk-write", false, want},
		{"arm without a context deadline", http.MethodPut, "/failpoints/controller-before-send", true, ""},
		{"release", http.MethodPost, "/failpoints/controller-before-broker-change/release", false, ""},
		{"disarm", http.MethodDelete, "/failpoints/controller-before-broker-change", false, ""},
		{"state", http.MethodGet, "/state", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if !tt.noDeadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, deadline)
				defer cancel()
			}
			req, err := adminRequest(ctx, "127.0.0.1:9093", tt.method, tt.path, "1*pause")
			if err != nil {
				t.Fatal(err)
			}
			if got := req.Header.Get(history.FailpointArmBeforeHeader); got != tt.want {
				t.Errorf("%s = %q, want %q", history.FailpointArmBeforeHeader, got, tt.want)
			}
		})
	}
}
