package faults

import (
	"slices"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// KAFKA-12671's opening is planned only for a run whose workload has
// transactional producers, first, as a pause of leader-before-txn-append
// provoked by the workload's own produce; a run without them plans the
// openings it planned before and none of its failpoint steps arms the
// window, one at a time or dense.
func TestTxnOpeningOnlyForTransactionalRuns(t *testing.T) {
	plan := func(dense, txn bool, seed uint64, total time.Duration, kinds []FaultKind) Schedule {
		opt := Options{Transactions: txn}
		if !dense {
			return PlanWith(seed, full, total, 2*time.Second, 6*time.Second, kinds, opt)
		}
		usable, _ := Usable(full, kinds)
		s, err := PlanDenseWith(seed, total, 2*time.Second, 6*time.Second, usable, 1.5, opt)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	bugs := func(s Schedule) (out []string) {
		for _, st := range s.Steps {
			if st.Opening {
				out = append(out, OpeningBug(st))
			}
		}
		return out
	}
	tests := []struct {
		name  string
		txn   bool
		total time.Duration
		kinds []FaultKind
		want  []string
		// then: an opening that follows want when the seed's first start
		// leaves room for it
		then string
	}{
		{"queue with transactions, 60 s", true, time.Minute, Catalogue, []string{"KAFKA-12671", "KAFKA-532", "KAFKA-532", "KAFKA-7235", "KAFKA-7235"}, "KAFKA-3861"},
		{"queue with transactions, 2 min", true, 2 * time.Minute, Catalogue, []string{"KAFKA-12671", "KAFKA-532", "KAFKA-532", "KAFKA-7235", "KAFKA-7235", "KAFKA-3861", "KAFKA-16667"}, ""},
		{"queue with transactions, no failpoint fault", true, time.Minute, []FaultKind{KillLaggingLeader, PauseNode}, []string{"KAFKA-3861"}, ""},
		{"queue with transactions, too short", true, 12 * time.Second, []FaultKind{FailpointFault}, []string{"KAFKA-532"}, ""},
		{"log workload, 60 s", false, time.Minute, Catalogue, []string{"KAFKA-532", "KAFKA-532", "KAFKA-7235", "KAFKA-7235", "KAFKA-3861", "KAFKA-16667"}, ""},
	}
	for _, dense := range []bool{false, true} {
		for _, tt := range tests {
			for seed := uint64(1); seed <= 20; seed++ {
				s := plan(dense, tt.txn, seed, tt.total, tt.kinds)
				got := bugs(s)
				if tt.then != "" && len(got) == len(tt.want)+1 && got[len(got)-1] == tt.then {
					got = got[:len(tt.want)]
				}
				if !slices.Equal(got, tt.want) {
					t.Fatalf("dense %v, %s, seed %d: openings %q, want %q", dense, tt.name, seed, got, tt.want)
				}
				if tt.txn && len(tt.want) > 0 && tt.want[0] == "KAFKA-12671" {
					p := PlanFailpoint(s.Steps[0].Pick)
					if p.Window.Name != history.FailpointLeaderBeforeTxnAppend || p.Action != FPPause || p.Provoke != ProvokeWorkload || p.Window.Role != RoleLeader {
						t.Fatalf("dense %v, %s, seed %d: KAFKA-12671 opening plans %+v", dense, tt.name, seed, p)
					}
					if s.Steps[0].Hold < 10*time.Second {
						t.Errorf("KAFKA-12671 opening holds %s: not past the queue producer's 9 s give-up", s.Steps[0].Hold)
					}
				}
				if !tt.txn {
					for i, st := range s.Steps {
						if st.Kind == FailpointFault && TxnWindow(PlanFailpoint(st.Pick).Window.Name) {
							t.Fatalf("dense %v, seed %d: step %d of a run without transactions arms %s", dense, seed, i, PlanFailpoint(st.Pick).Window.Name)
						}
					}
				}
			}
		}
	}
}

// A run with transactional producers also draws the window in its random
// failpoint steps; one without them never does, and its picks are the
// same draws otherwise (the starts and holds of a seed do not move).
func TestTxnWindowDrawnOnlyWithTransactions(t *testing.T) {
	with := PlanWith(5, full, 2*time.Hour, 2*time.Second, 6*time.Second, []FaultKind{FailpointFault}, Options{Transactions: true, NoOpenings: true})
	without := PlanWith(5, full, 2*time.Hour, 2*time.Second, 6*time.Second, []FaultKind{FailpointFault}, Options{NoOpenings: true})
	if len(with.Steps) != len(without.Steps) {
		t.Fatalf("%d steps with transactions, %d without", len(with.Steps), len(without.Steps))
	}
	drawn := 0
	for i := range with.Steps {
		a, b := with.Steps[i], without.Steps[i]
		if a.At != b.At || a.Hold != b.Hold {
			t.Fatalf("step %d moved: %+v and %+v", i, a, b)
		}
		if TxnWindow(PlanFailpoint(b.Pick).Window.Name) {
			t.Fatalf("step %d of a run without transactions arms the transactional window", i)
		}
		if TxnWindow(PlanFailpoint(a.Pick).Window.Name) {
			drawn++
		} else if a.Pick != b.Pick {
			t.Fatalf("step %d: pick %d with transactions, %d without, on a window both reach", i, a.Pick, b.Pick)
		}
	}
	if drawn == 0 {
		t.Error("two hours of failpoint steps with transactions never armed leader-before-txn-append")
	}
}
