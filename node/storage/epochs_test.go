package storage

import (
	"reflect"
	"testing"

	"github.com/zkchaos/zkchaos/node/storage/checkpoint"
)

func TestEpochCacheAssign(t *testing.T) {
	type op struct {
		epoch   int32
		start   int64
		changed bool
		warn    bool
	}
	tests := []struct {
		name string
		ops  []op
		want []checkpoint.EpochEntry
	}{
		{"append in order", []op{{0, 0, true, false}, {1, 5, true, false}, {1, 9, false, false}}, []checkpoint.EpochEntry{ep(0, 0), ep(1, 5)}},
		// LeaderEpochFileCache.assign (2.6.3) takes the latest assignment as
		// the truth: a lower epoch drops the entries it conflicts with.
		{"lower epoch replaces later entries", []op{{3, 0, true, false}, {2, 10, true, true}}, []checkpoint.EpochEntry{ep(2, 10)}},
		{"lower epoch keeps earlier entries", []op{{1, 0, true, false}, {3, 5, true, false}, {2, 10, true, true}}, []checkpoint.EpochEntry{ep(1, 0), ep(2, 10)}},
		{"same epoch at a lower offset moves its start", []op{{1, 0, true, false}, {2, 7, true, false}, {2, 5, true, true}}, []checkpoint.EpochEntry{ep(1, 0), ep(2, 5)}},
		{"undefined epoch ignored", []op{{-1, 0, false, false}}, nil},
		{"empty epoch replaced", []op{{1, 0, true, false}, {2, 7, true, false}, {3, 7, true, false}}, []checkpoint.EpochEntry{ep(1, 0), ep(3, 7)}},
		{"overwritten offsets replaced", []op{{1, 0, true, false}, {2, 7, true, false}, {4, 3, true, true}}, []checkpoint.EpochEntry{ep(1, 0), ep(4, 3)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c epochCache
			for _, o := range tc.ops {
				changed, w := c.assign(o.epoch, o.start)
				if changed != o.changed || (w != "") != o.warn {
					t.Fatalf("assign(%d, %d) = %v, %q", o.epoch, o.start, changed, w)
				}
			}
			if !reflect.DeepEqual(c.entries, tc.want) {
				t.Fatalf("entries %v, want %v", c.entries, tc.want)
			}
		})
	}
}
