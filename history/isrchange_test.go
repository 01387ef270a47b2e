package history

import "testing"

// An expand's join survives the file, including a fetch offset of 0 (a
// follower with an empty log), and a shrink has none.
func TestISRChangeJoinRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name string
		join *ISRJoin
	}{
		{"expand from an empty log", &ISRJoin{Follower: 3, FetchOffset: 0, HW: 7}},
		{"expand", &ISRJoin{Follower: 2, FetchOffset: 9, HW: 7}},
		{"shrink", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := ISRChange{Topic: "t", Partition: 0, Action: ISRExpand, Old: []int32{1}, New: []int32{1, 3}, LeaderEpoch: 2, Outcome: ZKOK, Join: c.join}
			got := throughFile(t, 1, Event{Kind: KindISRChange, ISR: &in}).ISR.Join
			if (got == nil) != (c.join == nil) || got != nil && *got != *c.join {
				t.Fatalf("join %+v, want %+v", got, c.join)
			}
		})
	}
}
