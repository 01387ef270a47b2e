package history

import (
	"bytes"
	"testing"
)

// A group_request line written by a node reads back with every field, and
// Fenced tells a refusal for the generation from other answers.
func TestGroupRequestRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		g      GroupRequest
		fenced bool
	}{
		{"commit from an old generation", GroupRequest{API: GroupAPIOffsetCommit, APIVersion: 8, Group: "g", Partition: 2, Member: "m-1",
			Generation: 3, GroupGeneration: 4, State: "Stable", Leader: "m-2", ErrorCode: ErrIllegalGeneration,
			Offsets: []GroupOffset{{Topic: "t", Partition: 0, Offset: 7, ErrorCode: ErrIllegalGeneration}}}, true},
		{"accepted heartbeat", GroupRequest{API: GroupAPIHeartbeat, Group: "g", Member: "m-1", Generation: 4, GroupGeneration: 4}, false},
		{"not the coordinator", GroupRequest{API: GroupAPIJoin, Group: "g", Generation: -1, GroupGeneration: -1, ErrorCode: ErrNotCoordinator}, false},
		{"load", GroupRequest{API: GroupLoadPartition, Partition: 1, Generation: -1, GroupGeneration: -1, Groups: []string{"a", "b"}}, false},
	}
	var buf bytes.Buffer
	w := NewWriter(&buf, "n1", 1)
	for _, tc := range tests {
		g := tc.g
		if err := w.Write(Event{Kind: KindGroupRequest, Group: &g}); err != nil {
			t.Fatal(err)
		}
	}
	evs, warns, err := Decode(&buf, "n1.jsonl")
	if err != nil || len(warns) != 0 || len(evs) != len(tests) {
		t.Fatalf("decode: %d events, %v, %v", len(evs), warns, err)
	}
	for i, tc := range tests {
		got := evs[i].Group
		if got == nil || got.API != tc.g.API || got.Generation != tc.g.Generation || got.GroupGeneration != tc.g.GroupGeneration ||
			got.ErrorCode != tc.g.ErrorCode || len(got.Offsets) != len(tc.g.Offsets) || len(got.Groups) != len(tc.g.Groups) {
			t.Fatalf("%s: read back %+v, wrote %+v", tc.name, got, tc.g)
		}
		if got.Fenced() != tc.fenced {
			t.Errorf("%s: Fenced %v, want %v", tc.name, got.Fenced(), tc.fenced)
		}
	}
}
