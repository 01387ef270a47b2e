package storage

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/node/storage/checkpoint"
)

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func lastSegment(t *testing.T, dir string) string {
	segs := segments(t, dir, 1)
	return segs[len(segs)-1]
}

// segments returns the log's segment files, oldest first; fewer than
// atLeast fails the test, whose damage needs that many.
func segments(t *testing.T, dir string, atLeast int) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(segs) < atLeast {
		t.Fatalf("need %d segments, have %d (%v)", atLeast, len(segs), err)
	}
	return segs
}

// buildLog writes a log of varied batches over several segments and returns
// its directory, the whole contents and each batch's end (offset after it)
// keyed by the byte position where it ends in the last segment.
func buildLog(t *testing.T, opts Options) (dir string, all []byte) {
	t.Helper()
	dir = t.TempDir()
	l := mustOpen(t, dir, opts)
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 40; i++ {
		if _, err := l.AppendAsLeader(makeBatch(1+rng.Intn(10), 20+rng.Intn(100), i), int32(i/10)); err != nil {
			t.Fatal(err)
		}
	}
	all = readAll(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, all
}

// TestCrashCutTail simulates a crash that tears the last write: the last
// segment is cut at random points. Recovery must keep exactly the complete
// batches before the cut, warn iff bytes were dropped, and accept appends.
func TestCrashCutTail(t *testing.T) {
	opts := Options{SegmentBytes: 4096, IndexIntervalBytes: 512}
	dir, all := buildLog(t, opts)
	seg := lastSegment(t, dir)
	segData, _ := os.ReadFile(seg)
	segBase, _ := parseSegmentName(filepath.Base(seg))
	// Batch boundaries in the last segment.
	bounds := map[int64]int64{0: segBase} // byte position -> offset after
	for pos := 0; pos < len(segData); {
		h, n, err := NextBatch(segData[pos:])
		if err != nil {
			t.Fatal(err)
		}
		pos += n
		bounds[int64(pos)] = h.LastOffset() + 1
	}
	rng := rand.New(rand.NewSource(2))
	cuts := []int{0, 1, 11, 12, 60, 61, len(segData) - 1, len(segData)}
	for i := 0; i < 40; i++ {
		cuts = append(cuts, rng.Intn(len(segData)+1))
	}
	for _, cut := range cuts {
		d := copyDir(t, dir)
		if err := os.Truncate(filepath.Join(d, filepath.Base(seg)), int64(cut)); err != nil {
			t.Fatal(err)
		}
		l, warns, err := Open(d, opts)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		// Expected: the last boundary <= cut.
		keep := int64(0)
		for p := range bounds {
			if p <= int64(cut) && p > keep {
				keep = p
			}
		}
		if l.LogEndOffset() != bounds[keep] {
			t.Fatalf("cut at %d: LEO %d, want %d", cut, l.LogEndOffset(), bounds[keep])
		}
		if dropped := int64(cut) - keep; (dropped > 0) != (len(warns) == 1) || (dropped > 0 && warns[0].DroppedBytes != dropped) {
			t.Fatalf("cut at %d: warnings %v, want one dropping %d bytes", cut, warns, dropped)
		}
		got := readAll(t, l)
		if !bytes.HasPrefix(all, got) {
			t.Fatalf("cut at %d: recovered data is not a prefix of the original", cut)
		}
		for _, e := range l.Epochs() {
			if e.StartOffset >= l.LogEndOffset() {
				t.Fatalf("cut at %d: epoch entry %v at or beyond LEO %d", cut, e, l.LogEndOffset())
			}
		}
		if _, err := l.AppendAsLeader(makeBatch(2, 10, 0), 9); err != nil {
			t.Fatalf("cut at %d: append after recovery: %v", cut, err)
		}
		l.Close()
		if l2, w, err := Open(d, opts); err != nil || len(w) != 0 {
			t.Fatalf("cut at %d: second reopen: %v %v", cut, w, err)
		} else {
			l2.Close()
		}
	}
}

func TestRecoveryTails(t *testing.T) {
	opts := Options{SegmentBytes: 12000}
	dir, _ := buildLog(t, opts)
	seg := filepath.Base(lastSegment(t, dir))
	segData, _ := os.ReadFile(filepath.Join(dir, seg))
	var starts []int
	for pos := 0; pos < len(segData); {
		_, n, _ := NextBatch(segData[pos:])
		starts = append(starts, pos)
		pos += n
	}
	lastStart := starts[len(starts)-1]
	midStart := starts[len(starts)/2]

	tests := []struct {
		name    string
		edit    func(b []byte) []byte
		keep    int    // bytes kept (Kafka's recovery: cut at the first invalid batch)
		refused string // with RefuseMidLogDamage: error substring; empty means cut as well
	}{
		{"zero-filled tail", func(b []byte) []byte { return append(b, make([]byte, 3000)...) }, len(segData), ""},
		{"garbage tail", func(b []byte) []byte { return append(b, []byte("not a batch at all")...) }, len(segData), ""},
		{"last batch CRC broken", func(b []byte) []byte { b[len(b)-3] ^= 0xff; return b }, lastStart, ""},
		{"last batch half zeroed", func(b []byte) []byte {
			for i := lastStart + 40; i < len(b); i++ {
				b[i] = 0
			}
			return b
		}, lastStart, ""},
		{"middle batch CRC broken", func(b []byte) []byte { b[midStart+70] ^= 0xff; return b }, midStart, "followed by a valid batch"},
		{"middle batch length huge", func(b []byte) []byte { b[midStart+8] = 0x7f; return b }, midStart, "followed by a valid batch"},
	}
	for _, tc := range tests {
		for _, refuse := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s refuse=%v", tc.name, refuse), func(t *testing.T) {
				d := copyDir(t, dir)
				p := filepath.Join(d, seg)
				data := tc.edit(append([]byte(nil), segData...))
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
				o := opts
				o.RefuseMidLogDamage = refuse
				l, warns, err := Open(d, o)
				if refuse && tc.refused != "" {
					if err == nil {
						l.Close()
						t.Fatal("want error, recovered")
					}
					if !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), p) {
						t.Fatalf("error %q should name %s and say %q", err, p, tc.refused)
					}
					// Nothing was cut.
					if now, _ := os.ReadFile(p); !bytes.Equal(now, data) {
						t.Fatal("segment modified although recovery failed")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				if len(warns) != 1 || warns[0].Position != int64(tc.keep) || warns[0].File != p {
					t.Fatalf("warnings %v, want one at %d", warns, tc.keep)
				}
				if st, _ := os.Stat(p); st.Size() != int64(tc.keep) {
					t.Fatalf("segment size %d, want %d", st.Size(), tc.keep)
				}
			})
		}
	}
	// A valid batch at the wrong offset is an error either way: this log
	// never writes one, so it is not a crash's doing.
	for _, refuse := range []bool{false, true} {
		d := copyDir(t, dir)
		data := append([]byte(nil), segData...)
		data[midStart+7]++
		if err := os.WriteFile(filepath.Join(d, seg), data, 0o644); err != nil {
			t.Fatal(err)
		}
		o := opts
		o.RefuseMidLogDamage = refuse
		if l, _, err := Open(d, o); err == nil || !strings.Contains(err.Error(), "not contiguous") {
			if err == nil {
				l.Close()
			}
			t.Fatalf("refuse=%v: valid batch at the wrong offset: %v, want an error", refuse, err)
		}
	}
}

// Log.recoverLog (Kafka 2.6.3): damage in a segment before the last cuts
// that segment at the first invalid batch and deletes every later segment;
// the log ends there. RefuseMidLogDamage refuses to start instead.
func TestRecoveryMidLogDamage(t *testing.T) {
	opts := Options{SegmentBytes: 2048}
	dir, all := buildLog(t, opts)
	segs := segments(t, dir, 3)
	first, _ := os.ReadFile(segs[0])
	var lastStart int // where the first segment's last batch starts
	var lastEnd int64 // the offset after the batch before it
	base, _ := parseSegmentName(filepath.Base(segs[0]))
	lastEnd = base
	for pos := 0; pos < len(first); {
		h, n, err := NextBatch(first[pos:])
		if err != nil {
			t.Fatal(err)
		}
		if pos+n == len(first) {
			lastStart = pos
			break
		}
		lastEnd = h.LastOffset() + 1
		pos += n
	}
	tests := []struct {
		name   string
		refuse bool
	}{
		{"Kafka: cut and delete the rest", false},
		{"refused", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := copyDir(t, dir)
			p := filepath.Join(d, filepath.Base(segs[0]))
			st, _ := os.Stat(p)
			if err := os.Truncate(p, st.Size()-5); err != nil {
				t.Fatal(err)
			}
			o := opts
			o.RefuseMidLogDamage = tc.refuse
			l, warns, err := Open(d, o)
			if tc.refuse {
				if err == nil || !strings.Contains(err.Error(), "sealed segment") || !strings.Contains(err.Error(), p) {
					t.Fatalf("Open: %v, want an error naming %s", err, p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.LogEndOffset() != lastEnd {
				t.Fatalf("LEO %d, want %d", l.LogEndOffset(), lastEnd)
			}
			if left, _ := filepath.Glob(filepath.Join(d, "*.log")); len(left) != 1 {
				t.Fatalf("segments left %v, want only the cut one", left)
			}
			if len(warns) != len(segs) || warns[0].Position != int64(lastStart) {
				t.Fatalf("warnings %v, want the cut at %d and one per deleted segment", warns, lastStart)
			}
			if got := readAll(t, l); !bytes.HasPrefix(all, got) {
				t.Fatal("recovered log is not a prefix of the original")
			}
			for _, e := range l.Epochs() {
				if e.StartOffset >= l.LogEndOffset() {
					t.Fatalf("epoch entry %v at or beyond LEO %d", e, l.LogEndOffset())
				}
			}
		})
	}
}

func TestRecoveryErrors(t *testing.T) {
	opts := Options{SegmentBytes: 2048}
	dir, _ := buildLog(t, opts)
	segs := segments(t, dir, 3)
	tests := []struct {
		name    string
		edit    func(d string)
		wantErr []string
	}{
		{"missing middle segment", func(d string) { os.Remove(filepath.Join(d, filepath.Base(segs[1]))) },
			[]string{filepath.Base(segs[2]), "previous segment"}},
		{"bad segment name", func(d string) { os.WriteFile(filepath.Join(d, "12.log"), nil, 0o644) },
			[]string{"12.log", "unexpected segment file name"}},
		{"malformed epoch checkpoint", func(d string) {
			os.WriteFile(filepath.Join(d, "leader-epoch-checkpoint"), []byte("0\n2\n0 0\nx 5\n"), 0o644)
		}, []string{"leader-epoch-checkpoint", "line 4"}},
		{"epoch checkpoint cut short", func(d string) {
			os.WriteFile(filepath.Join(d, "leader-epoch-checkpoint"), []byte("0\n2\n0 0\n"), 0o644)
		}, []string{"leader-epoch-checkpoint", "count line says 2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := copyDir(t, dir)
			tc.edit(d)
			l, _, err := Open(d, opts)
			if err == nil {
				l.Close()
				t.Fatal("want error")
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestRecoveryRebuildsEpochCache(t *testing.T) {
	opts := Options{SegmentBytes: 4096}
	dir, _ := buildLog(t, opts)
	l := mustOpen(t, dir, opts)
	want := l.Epochs()
	l.Close()
	if len(want) != 4 {
		t.Fatalf("epochs %v, want 4 entries", want)
	}
	os.Remove(filepath.Join(dir, checkpoint.LeaderEpochFile))
	l = mustOpen(t, dir, opts)
	defer l.Close()
	if !reflect.DeepEqual(l.Epochs(), want) {
		t.Fatalf("rebuilt epochs %v, want %v", l.Epochs(), want)
	}
	if _, ok, err := checkpoint.ReadEpochs(filepath.Join(dir, checkpoint.LeaderEpochFile)); !ok || err != nil {
		t.Fatalf("epoch file not rewritten: %v %v", ok, err)
	}
}

// An epoch assigned at the LEO with no data (a new leader that has not
// appended) is dropped on reopen, as Kafka truncates the cache to the LEO.
func TestRecoveryDropsEpochsAtLEO(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{})
	appendN(t, l, 1, 2, 1, 0)
	l.AssignEpoch(3)
	if len(l.Epochs()) != 2 {
		t.Fatalf("epochs %v", l.Epochs())
	}
	l.Close()
	l = mustOpen(t, dir, Options{})
	defer l.Close()
	if want := []checkpoint.EpochEntry{{Epoch: 1, StartOffset: 0}}; !reflect.DeepEqual(l.Epochs(), want) {
		t.Fatalf("epochs %v, want %v", l.Epochs(), want)
	}
}

// A crash in the middle of TruncateTo (segments are deleted newest first)
// leaves a prefix of the log; it opens cleanly, and a stale temporary epoch
// checkpoint is ignored.
func TestRecoveryAfterPartialSegmentDeletion(t *testing.T) {
	opts := Options{SegmentBytes: 2048}
	dir, all := buildLog(t, opts)
	segs := segments(t, dir, 1)
	os.Remove(segs[len(segs)-1])
	os.WriteFile(filepath.Join(dir, checkpoint.LeaderEpochFile+".tmp"), []byte("0\n9"), 0o644)
	l := mustOpen(t, dir, opts)
	defer l.Close()
	wantLEO, _ := parseSegmentName(filepath.Base(segs[len(segs)-1]))
	if l.LogEndOffset() != wantLEO {
		t.Fatalf("LEO %d, want %d", l.LogEndOffset(), wantLEO)
	}
	if got := readAll(t, l); !bytes.HasPrefix(all, got) {
		t.Fatal("remaining log is not a prefix")
	}
	for _, e := range l.Epochs() {
		if e.StartOffset >= wantLEO {
			t.Fatalf("epoch entry %v beyond LEO", e)
		}
	}
}
