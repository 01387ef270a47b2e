package checkers

import (
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

// Admin operations the controller still owed after the grace are a
// liveness violation; ones that completed, or whose timeout came before
// the grace ran out (the controller may have finished unseen), are not.
func TestLivenessAdminOps(t *testing.T) {
	reassign := history.ClientOp{F: history.FReassign, Topic: "chaos", Partition: 1, Process: 0}
	shutdown := history.ClientOp{F: history.FControlledShutdown, Broker: 2, Topic: "chaos", Partition: -1, Process: 0}
	with := func(o history.ClientOp, typ history.OpType, err string) history.ClientOp {
		o.Type, o.Error = typ, err
		return o
	}
	tests := []struct {
		name string
		op   history.ClientOp
		// completion type and when (ms); "" leaves it pending.
		done   history.OpType
		doneAt int64
		endAt  int64
		want   Verdict
		say    string
	}{
		{"completed after healing", reassign, history.OpOK, 1500, 3000, Valid, ""},
		{"refused by ZooKeeper", reassign, history.OpFail, 1100, 3000, Valid, ""},
		{"timed out inside the grace", reassign, history.OpInfo, 1080, 3000, Valid, ""},
		{"info after the grace", reassign, history.OpInfo, 2500, 3000, Invalid, "reassign of chaos-1 (invoked at event 1"},
		{"never completed, history past the grace", shutdown, "", 0, 3000, Invalid, "controlled-shutdown of broker 2"},
		{"never completed, history ends inside the grace", shutdown, "", 0, 1050, Valid, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := historytest.New()
			b.At(0).Fault(true, "f1", "pause", "n1")
			b.At(500).Op(with(tt.op, history.OpInvoke, ""))
			b.At(1000).Fault(false, "f1", "pause", "n1")
			if tt.done != "" {
				b.At(tt.doneAt).Op(with(tt.op, tt.done, "not completed within 15s"))
			}
			b.At(tt.endAt).Phase()
			r := Liveness{Grace: time.Second, MaxBadVersionRetries: 3}.Check(b.History())
			if r.Verdict != tt.want || !strings.Contains(r.Explanation, tt.say) {
				t.Fatalf("got %s: %s\nwant %s saying %q", r.Verdict, r.Explanation, tt.want, tt.say)
			}
		})
	}
}
