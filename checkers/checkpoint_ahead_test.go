package checkers

import (
	"slices"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// hwMove appends node's hw_advance for t-p from old to new.
func hwAt(b *hb.Builder, node, p int32, old, new int64) int {
	return b.Add(history.Event{Kind: history.KindHWAdvance, Node: node,
		HW: &history.HWAdvance{Topic: "t", Partition: p, Old: old, New: new, LeaderEpoch: 1}})
}

// A checkpoint entry is never above the highest high watermark the writer's
// current process had reported for the partition before the write.
func TestHWCheckpointAheadOfHighWatermark(t *testing.T) {
	runCases(t, HWCheckpoint{}, []tcase{
		{name: "leader writes its log end offset while a follower lags", want: Invalid,
			explain: "put t-0 at offset 7 while its high watermark was 5", build: func(b *hb.Builder) []int {
				b.Start(1)
				hw := hwAt(b, 1, 0, 0, 5)
				hwAt(b, 1, 0, 4, 5) // reaches 5 again: the first report stays the one named
				cp := checkpoint(b, 1, nil, cpe(0, 7))
				return []int{hw, cp}
			}},
		{name: "the old process's high watermark does not count after a restart", want: Invalid,
			explain: "put t-0 at offset 6 while its high watermark was 4", build: func(b *hb.Builder) []int {
				b.Start(2)
				hwAt(b, 2, 0, 0, 9)
				checkpoint(b, 2, nil, cpe(0, 9))
				b.Start(2)
				hw := hwAt(b, 2, 0, 3, 4)
				cp := checkpoint(b, 2, nil, cpe(0, 6))
				return []int{hw, cp}
			}},
		{name: "another broker's high watermark does not count", want: Invalid,
			explain: "broker 2's checkpoint write", build: func(b *hb.Builder) []int {
				hwAt(b, 1, 0, 0, 10)
				hw := hwAt(b, 2, 0, 0, 3)
				cp := checkpoint(b, 2, nil, cpe(0, 10))
				return []int{hw, cp}
			}},
		{name: "a move logged after the write does not excuse it", want: Invalid,
			explain: "at offset 7 while its high watermark was 5", build: func(b *hb.Builder) []int {
				hw := hwAt(b, 3, 1, 0, 5)
				cp := checkpoint(b, 3, nil, cpe(1, 7))
				hwAt(b, 3, 1, 5, 7)
				return []int{hw, cp}
			}},
		{name: "entry at the high watermark", want: Valid, build: func(b *hb.Builder) []int {
			b.Start(1)
			hwAt(b, 1, 0, 0, 5)
			checkpoint(b, 1, nil, cpe(0, 5))
			return nil
		}},
		{name: "entry below the high watermark, which moved on after the read", want: Valid, build: func(b *hb.Builder) []int {
			hwAt(b, 1, 0, 0, 5)
			hwAt(b, 1, 0, 5, 8)
			checkpoint(b, 1, nil, cpe(0, 5))
			return nil
		}},
		{name: "restored high watermark never reported is not judged", want: Valid, build: func(b *hb.Builder) []int {
			b.Start(2)
			hwAt(b, 2, 1, 0, 2) // another partition
			checkpoint(b, 2, nil, cpe(0, 50), cpe(1, 2))
			return nil
		}},
		{name: "truncation logged between the read and the write", want: Valid, build: func(b *hb.Builder) []int {
			// The write read the restored 50 before the truncation moved
			// the high watermark to 40 and logged it.
			b.Start(2)
			b.Add(history.Event{Kind: history.KindTruncation, Node: 2, Truncation: &history.Truncation{Topic: "t", Partition: 0, From: 60, To: 40}})
			hwAt(b, 2, 0, 50, 40)
			checkpoint(b, 2, nil, cpe(0, 50))
			return nil
		}},
		{name: "trimmed history without hw_advance", want: Valid, build: func(b *hb.Builder) []int {
			checkpoint(b, 2, nil, cpe(0, 5))
			checkpoint(b, 2, nil, cpe(0, 9))
			return nil
		}},
		{name: "hw_advance without payload", want: Valid, build: func(b *hb.Builder) []int {
			b.Add(history.Event{Kind: history.KindHWAdvance, Node: 1})
			b.Add(history.Event{Kind: history.KindHWCheckpoint, Node: 1})
			checkpoint(b, 1, nil, cpe(0, 5))
			return nil
		}},
	})
}

// One violation per write, naming every partition it put ahead with the
// hw_advance that reported its high watermark, and the times.
func TestHWCheckpointAheadExplains(t *testing.T) {
	b := hb.New()
	b.Start(2)                                  // 0, +0s
	b.At(500)                                   //
	hwAt(b, 2, 0, 0, 4)                         // 1, +0.5s
	hwAt(b, 2, 1, 0, 2)                         // 2
	b.At(1500)                                  //
	checkpoint(b, 2, nil, cpe(0, 4), cpe(1, 2)) // 3: clean
	hwAt(b, 2, 1, 2, 3)                         // 4, +1.5s
	b.At(2250)                                  //
	checkpoint(b, 2, nil, cpe(0, 6), cpe(1, 9)) // 5, +2.25s
	hwAt(b, 2, 1, 3, 9)                         // 6: t-1 catches up
	checkpoint(b, 2, nil, cpe(0, 7), cpe(1, 9)) // 7, +2.25s
	r := HWCheckpoint{}.Check(b.History())
	var got []string
	for _, v := range r.Violations {
		got = append(got, v.Explanation)
	}
	want := []string{
		"broker 2's checkpoint write (event 5, +2.25s) put t-0 at offset 6 while its high watermark was 4 (the highest its process had reported, by hw_advance event 1 at +500ms) and t-1 at offset 9 while its high watermark was 3 (the highest its process had reported, by hw_advance event 4 at +1.5s): the checkpoint must hold the high watermark, and a restart from it would take the records above it, uncommitted when it was written, as committed.",
		"broker 2's checkpoint write (event 7, +2.25s) put t-0 at offset 7 while its high watermark was 4 (the highest its process had reported, by hw_advance event 1 at +500ms): the checkpoint must hold the high watermark, and a restart from it would take the records above it, uncommitted when it was written, as committed.",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Equal(r.Violations[0].Events, []int{5, 1, 4}) {
		t.Errorf("first violation's events %v, want [5 1 4]", r.Violations[0].Events)
	}
}

// The generator's clean histories write each partition's high watermark at
// the time, and the rule judges them.
func TestHWCheckpointAheadJudgesGeneratedHistories(t *testing.T) {
	h := hb.Clean(hb.GenConfig{Partitions: 3, Processes: 4, Ops: 300, UnknownRate: 0.2, ReadRate: 0.3, NodeEvents: true, Seed: 3})
	r := HWCheckpoint{}.Check(h)
	if r.Verdict != Valid {
		t.Fatalf("verdict %s: %s", r.Verdict, r.Explanation)
	}
	if n, _ := r.Details["entries_judged_against_hw"].(int); n == 0 {
		t.Fatalf("no entry judged: %s", r.Explanation)
	}
}
