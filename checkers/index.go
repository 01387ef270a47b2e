package checkers

import (
	"iter"
	"slices"
	"sync"

	"github.com/zkchaos/zkchaos/history"
)

// kindIndex is, for one history, the positions of its events by kind, in
// history order. Most checkers look at a few kinds of node and watcher
// event, a small part of a history that client operations fill; walking
// their positions instead of every event is what lets twenty checkers
// share the work of one pass over a million events.
// Positions are int32, sized exactly (a count first), so a history of a
// million events costs 4 MB of index.
type kindIndex map[history.Kind][]int32

func buildKindIndex(h *history.History) kindIndex {
	counts := map[history.Kind]int{}
	for i := range h.Events {
		counts[h.Events[i].Kind]++
	}
	ix := make(kindIndex, len(counts))
	for k, n := range counts {
		ix[k] = make([]int32, 0, n)
	}
	for i := range h.Events {
		k := h.Events[i].Kind
		ix[k] = append(ix[k], int32(i))
	}
	return ix
}

// kindIndexes holds the index of the histories Run is checking, by history.
var kindIndexes sync.Map // *history.History → kindIndex

// eventsOf yields h's events of the given kinds in history order: the
// events `for i := range h.Events` would reach with a switch on those
// kinds, and no other. A loop over it behaves as that loop did as long as
// it ignores every other kind.
//
// Under Run it walks the kind index Run built; a checker called on its own
// (a test, a benchmark of one checker) scans the events instead, which
// costs what one index build would and keeps nothing after it.
func eventsOf(h *history.History, kinds ...history.Kind) iter.Seq[*history.Event] {
	v, ok := kindIndexes.Load(h)
	if !ok {
		return func(yield func(*history.Event) bool) {
			for i := range h.Events {
				if e := &h.Events[i]; slices.Contains(kinds, e.Kind) && !yield(e) {
					return
				}
			}
		}
	}
	ix := v.(kindIndex)
	lists := make([][]int32, 0, len(kinds))
	for _, k := range kinds {
		if l := ix[k]; len(l) > 0 {
			lists = append(lists, l)
		}
	}
	return func(yield func(*history.Event) bool) {
		// A merge of a few sorted lists: the smallest head each step.
		pos := make([]int, len(lists))
		for {
			best := -1
			for j, l := range lists {
				if pos[j] < len(l) && (best < 0 || l[pos[j]] < lists[best][pos[best]]) {
					best = j
				}
			}
			if best < 0 {
				return
			}
			i := lists[best][pos[best]]
			pos[best]++
			if !yield(&h.Events[i]) {
				return
			}
		}
	}
}
