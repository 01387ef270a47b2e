package node

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/eventlog"
	"github.com/zkchaos/zkchaos/node/failpoint"
)

// An arm request a node reads after the harness stopped waiting for it is
// refused. In a queue run (seed 7) the harness's PUT of
// controller-before-broker-change reached broker 3 while another fault
// held it SIGSTOPped; the harness gave up after 5s and recorded the window
// as not reached, broker 3 resumed, read the request and armed the
// failpoint, and 3.5s later, as controller at epoch 8, held its broker
// change there to the end of the run: no leader for any partition after the
// heal.
func TestArmRefusedAfterItsDeadline(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixNano(), 10) }
	tests := []struct {
		name      string
		header    string
		wantCode  int
		wantArmed bool
	}{
		{"no deadline", "", http.StatusNoContent, true},
		{"read before its deadline", at(time.Minute), http.StatusNoContent, true},
		{"read after its deadline", at(-time.Second), http.StatusRequestTimeout, false},
		{"malformed deadline", "soon", http.StatusBadRequest, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var events bytes.Buffer
			n := &Node{log: eventlog.New(history.NewWriter(&events, "n3", 3), 3, nil), fp: failpoint.New()}
			req := httptest.NewRequest(http.MethodPut, "/failpoints/"+failpoint.ControllerBeforeBrokerChange, strings.NewReader("1*pause"))
			if tt.header != "" {
				req.Header.Set(history.FailpointArmBeforeHeader, tt.header)
			}
			rec := httptest.NewRecorder()
			n.adminMux().ServeHTTP(rec, req)
			if rec.Code != tt.wantCode {
				t.Errorf("status %d, want %d (%s)", rec.Code, tt.wantCode, rec.Body.String())
			}
			_, armed := n.fp.Armed()[failpoint.ControllerBeforeBrokerChange]
			if armed != tt.wantArmed {
				t.Errorf("armed %v, want %v", armed, tt.wantArmed)
			}
		})
	}
}
