package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// composite is a composite fault as its tests drive it.
type composite interface {
	inject(ctx context.Context, pick int) (Heal, error)
}

// injectThenHeal injects f at pick and heals it as soon as inject returns
// (the heal waits for whatever the fault still has in flight), failing t on
// either error.
func injectThenHeal(t testing.TB, f composite, pick int) {
	t.Helper()
	heal, err := f.inject(t.Context(), pick)
	if err != nil {
		t.Fatal(err)
	}
	if err := heal(t.Context()); err != nil {
		t.Fatalf("heal: %v", err)
	}
}

// pickWhere returns the first pick whose failpoint plan wants says yes to;
// what names the plan wanted in the failure.
func pickWhere(t testing.TB, what string, wants func(FPPlan) bool) int {
	t.Helper()
	for pick := range 100000 {
		if wants(PlanFailpoint(pick)) {
			return pick
		}
	}
	t.Fatalf("no pick plans %s", what)
	return 0
}

// armsOf injects and heals each failpoint step of s against a fresh fake
// world and returns the arm calls they made, each after its step's offset
// and whether it opens the schedule: what two schedules must agree on to
// arm the same failpoints at the same times.
func armsOf(t testing.TB, s Schedule) []string {
	t.Helper()
	var out []string
	for _, st := range s.Steps {
		if st.Kind != FailpointFault {
			continue
		}
		w := &fpWorld{armed: map[string]time.Time{}}
		injectThenHeal(t, fpFault(w, nil, fpProcs{w}), st.Pick)
		for _, c := range w.calls {
			if strings.HasPrefix(c, "arm") {
				out = append(out, fmt.Sprintf("%s opening=%v %s", st.At, st.Opening, c))
			}
		}
	}
	return out
}

// reloaded is s saved as schedule.json and loaded again, as --replay does.
func reloaded(t testing.TB, s Schedule) Schedule {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var replay Schedule
	if err := json.Unmarshal(b, &replay); err != nil {
		t.Fatal(err)
	}
	return replay
}
