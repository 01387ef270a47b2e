package checkers

import (
	"fmt"
	"slices"
	"testing"

	"github.com/zkchaos/zkchaos/history"
)

// eventsOf walks Run's kind index, or scans the events for a checker
// called on its own; both yield the same events.
func TestEventsOf(t *testing.T) {
	kinds := []history.Kind{history.KindOp, history.KindNodeStart, history.KindOp, history.KindZKWatch, history.KindNodeStart, history.KindHWAdvance, history.KindOp}
	h := &history.History{}
	for i, k := range kinds {
		h.Events = append(h.Events, history.Event{Kind: k, Index: i})
	}
	tests := []struct {
		name  string
		kinds []history.Kind
		want  []int
	}{
		{"none asked", nil, nil},
		{"one kind", []history.Kind{history.KindNodeStart}, []int{1, 4}},
		{"merged in history order", []history.Kind{history.KindHWAdvance, history.KindNodeStart, history.KindZKWatch}, []int{1, 3, 4, 5}},
		{"a kind the history lacks", []history.Kind{history.KindTruncation, history.KindZKWatch}, []int{3}},
		{"every kind", []history.Kind{history.KindOp, history.KindNodeStart, history.KindZKWatch, history.KindHWAdvance}, []int{0, 1, 2, 3, 4, 5, 6}},
	}
	for _, indexed := range []bool{false, true} {
		if indexed {
			kindIndexes.Store(h, buildKindIndex(h))
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s indexed=%v", tt.name, indexed), func(t *testing.T) {
				var got []int
				for e := range eventsOf(h, tt.kinds...) {
					if !slices.Contains(tt.kinds, e.Kind) {
						t.Errorf("event %d of kind %s was not asked for", e.Index, e.Kind)
					}
					got = append(got, e.Index)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("got %v, want %v", got, tt.want)
				}
				// A loop that breaks off stops the walk.
				n := 0
				for range eventsOf(h, tt.kinds...) {
					n++
					break
				}
				if n != min(len(tt.want), 1) {
					t.Errorf("break after the first event walked %d", n)
				}
			})
		}
	}
	kindIndexes.Delete(h)
}
