package harness

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/zkchaos/zkchaos/history"
)

// fakeBatch is a record batch's header as droppedOffsets reads it: base
// offset, length, last offset delta, padded to size bytes.
func fakeBatch(base int64, records int32, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(size-12))
	binary.BigEndian.PutUint32(b[23:], uint32(records-1))
	return b
}

func TestLoseUnflushedCutsToTheSidecar(t *testing.T) {
	seg0, seg1 := "00000000000000000000.log", "00000000000000000010.log"
	seg := append(fakeBatch(0, 5, 100), fakeBatch(5, 5, 100)...)
	cases := []struct {
		name     string
		sidecar  map[string]int64 // nil: no sidecar
		files    map[string][]byte
		wantLen  map[string]int64
		wantCuts []string
	}{
		{name: "the unflushed batch goes", sidecar: map[string]int64{seg0: 100},
			files: map[string][]byte{seg0: seg}, wantLen: map[string]int64{seg0: 100},
			wantCuts: []string{"chaos-0 offsets [5, 10) (" + seg0 + " 200 → 100 bytes)"}},
		{name: "all flushed: nothing cut", sidecar: map[string]int64{seg0: 200},
			files: map[string][]byte{seg0: seg}, wantLen: map[string]int64{seg0: 200}},
		{name: "a segment the sidecar does not list loses everything", sidecar: map[string]int64{seg0: 200},
			files:    map[string][]byte{seg0: seg, seg1: fakeBatch(10, 3, 80)},
			wantLen:  map[string]int64{seg0: 200, seg1: 0},
			wantCuts: []string{"chaos-0 offsets [10, 13) (" + seg1 + " 80 → 0 bytes)"}},
		{name: "no sidecar: left alone", files: map[string][]byte{seg0: seg}, wantLen: map[string]int64{seg0: 200}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := t.TempDir()
			dir := filepath.Join(data, "chaos-0")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, b := range c.files {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if c.sidecar != nil {
				if err := os.WriteFile(filepath.Join(dir, history.DurableLengthsFile), history.FormatDurableLengths(c.sidecar), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cuts, err := loseUnflushed(data)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fmt.Sprint(cuts), fmt.Sprint(c.wantCuts); got != want {
				t.Errorf("cuts %s, want %s", got, want)
			}
			for name, want := range c.wantLen {
				st, err := os.Stat(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if st.Size() != want {
					t.Errorf("%s: %d bytes, want %d", name, st.Size(), want)
				}
			}
		})
	}
}
