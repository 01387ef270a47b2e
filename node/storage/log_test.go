package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/zkchaos/zkchaos/node/storage/checkpoint"
)

// appendN appends count batches of recs records each as leader at epoch and
// returns the batches as stored (stamped).
func appendN(t *testing.T, l *Log, count, recs int, epoch int32, tag int) {
	t.Helper()
	for i := 0; i < count; i++ {
		leo := l.LogEndOffset()
		info, err := l.AppendAsLeader(makeBatch(recs, 100, tag+i), epoch)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if info.FirstOffset != leo || info.LastOffset != leo+int64(recs)-1 {
			t.Fatalf("append %d: offsets [%d,%d], want [%d,%d]", i, info.FirstOffset, info.LastOffset, leo, leo+int64(recs)-1)
		}
	}
}

// readAll reads the whole log batch by batch, checking offsets are
// contiguous, and returns the concatenated bytes.
func readAll(t *testing.T, l *Log) []byte {
	t.Helper()
	var out []byte
	next := l.LogStartOffset()
	for next < l.LogEndOffset() {
		b, err := l.Read(next, 1, -1)
		if err != nil {
			t.Fatalf("read %d: %v", next, err)
		}
		bs := parseAll(t, b)
		if len(bs) != 1 || bs[0].FirstOffset != next {
			t.Fatalf("read %d: got %d batches, first at %d", next, len(bs), bs[0].FirstOffset)
		}
		next = bs[0].FirstOffset + int64(bs[0].LastOffsetDelta) + 1
		out = append(out, b...)
	}
	return out
}

func TestAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 2000, IndexIntervalBytes: 300}
	l := mustOpen(t, dir, opts)
	appendN(t, l, 20, 3, 0, 0)
	appendN(t, l, 20, 2, 4, 100)
	if got := l.LogEndOffset(); got != 100 {
		t.Fatalf("LEO %d, want 100", got)
	}
	segs := segments(t, dir, 5) // several with SegmentBytes 2000
	if filepath.Base(segs[0]) != "00000000000000000000.log" {
		t.Fatalf("first segment %s", segs[0])
	}
	before := readAll(t, l)
	wantEpochs := []checkpoint.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 4, StartOffset: 60}}
	if !reflect.DeepEqual(l.Epochs(), wantEpochs) {
		t.Fatalf("epochs %v, want %v", l.Epochs(), wantEpochs)
	}
	// Stored batches carry the leader's offsets and epoch, and the client's CRC.
	for _, b := range parseAll(t, before) {
		wantEpoch := int32(0)
		if b.FirstOffset >= 60 {
			wantEpoch = 4
		}
		if b.PartitionLeaderEpoch != wantEpoch {
			t.Fatalf("batch at %d has epoch %d, want %d", b.FirstOffset, b.PartitionLeaderEpoch, wantEpoch)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(0, 100, -1); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	l = mustOpen(t, dir, opts)
	defer l.Close()
	if l.LogEndOffset() != 100 || !bytes.Equal(readAll(t, l), before) {
		t.Fatal("reopened log differs")
	}
	if !reflect.DeepEqual(l.Epochs(), wantEpochs) {
		t.Fatalf("epochs after reopen %v", l.Epochs())
	}
	appendN(t, l, 1, 1, 4, 999)
	if l.LogEndOffset() != 101 {
		t.Fatalf("LEO after reopen+append %d", l.LogEndOffset())
	}
}

func TestRead(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{SegmentBytes: 4000, IndexIntervalBytes: 1000})
	defer l.Close()
	appendN(t, l, 30, 5, 1, 0) // batches [0,4], [5,9], ...
	one := len(makeBatch(5, 100, 0))
	tests := []struct {
		name      string
		from      int64
		maxBytes  int
		maxOffset int64
		wantFirst int64 // base offset of first batch, -1 for none
		wantN     int
		wantErr   error
	}{
		{"batch start", 10, one, -1, 10, 1, nil},
		{"mid batch returns containing batch", 12, one, -1, 10, 1, nil},
		{"last offset of batch", 14, one, -1, 10, 1, nil},
		{"maxBytes below one batch still returns one", 0, 1, -1, 0, 1, nil},
		{"negative maxBytes", 0, -5, -1, 0, 1, nil},
		{"maxBytes for three", 30, 3*one + one/2, -1, 30, 3, nil},
		{"stops at segment end", 0, 1 << 20, -1, 0, 4000 / one, nil},
		{"maxOffset holds back straddling batch", 10, 1 << 20, 17, 10, 1, nil},
		{"maxOffset at batch boundary", 10, 1 << 20, 20, 10, 2, nil},
		{"nothing below maxOffset", 10, 1 << 20, 12, -1, 0, nil},
		{"from at LEO", 150, 100, -1, -1, 0, nil},
		{"last batch", 149, 100, -1, 145, 1, nil},
		{"beyond LEO", 151, 100, -1, -1, 0, ErrOffsetOutOfRange},
		{"negative", -1, 100, -1, -1, 0, ErrOffsetOutOfRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := l.Read(tc.from, tc.maxBytes, tc.maxOffset)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			bs := parseAll(t, b)
			if len(bs) != tc.wantN {
				t.Fatalf("%d batches, want %d", len(bs), tc.wantN)
			}
			if tc.wantN > 0 && bs[0].FirstOffset != tc.wantFirst {
				t.Fatalf("first batch at %d, want %d", bs[0].FirstOffset, tc.wantFirst)
			}
		})
	}
}

func TestAppendRejects(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{MaxBatchBytes: 2000})
	defer l.Close()
	bad := makeBatch(2, 10, 0)
	bad[70] ^= 1
	if _, err := l.AppendAsLeader(bad, 0); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("corrupt batch: %v", err)
	}
	if _, err := l.AppendAsLeader(makeBatch(30, 100, 0), 0); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("large batch: %v", err)
	}
	two := append(makeBatch(1, 10, 0), makeBatch(1, 10, 1)...)
	if _, err := l.AppendAsLeader(two, 0); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("two batches in one produce: %v", err)
	}
	if _, err := l.AppendAsLeader(makeBatch(1, 10, 0), -1); err == nil {
		t.Fatal("negative epoch accepted")
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("LEO %d after rejected appends", l.LogEndOffset())
	}
	// The caller's bytes are not modified.
	in := makeBatch(1, 10, 0)
	orig := append([]byte(nil), in...)
	l.AppendAsLeader(in, 3)
	l.AppendAsLeader(in, 3)
	if !bytes.Equal(in, orig) {
		t.Fatal("AppendAsLeader modified its input")
	}
}

func TestAppendAsFollower(t *testing.T) {
	leader := mustOpen(t, t.TempDir(), Options{})
	defer leader.Close()
	appendN(t, leader, 5, 2, 1, 0)
	appendN(t, leader, 5, 3, 3, 50)
	all, err := leader.Read(0, 1<<20, -1)
	if err != nil {
		t.Fatal(err)
	}
	f := mustOpen(t, t.TempDir(), Options{SegmentBytes: 1000})
	defer f.Close()
	// A fetch response cut inside a batch: the partial batch is ignored.
	cut := len(all) - 10
	info, err := f.AppendAsFollower(all[:cut])
	if err != nil {
		t.Fatal(err)
	}
	if info.Batches != 9 || f.LogEndOffset() != 22 {
		t.Fatalf("appended %d batches, LEO %d; want 9, 22", info.Batches, f.LogEndOffset())
	}
	// Not contiguous with the LEO.
	if _, err := f.AppendAsFollower(all); !errors.Is(err, ErrNonContiguous) {
		t.Fatalf("overlapping append: %v", err)
	}
	rest, _ := leader.Read(22, 1<<20, -1)
	if _, err := f.AppendAsFollower(rest); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f); !bytes.Equal(got, all) {
		t.Fatal("follower bytes differ from the leader's")
	}
	if !reflect.DeepEqual(f.Epochs(), leader.Epochs()) {
		t.Fatalf("follower epochs %v, leader %v", f.Epochs(), leader.Epochs())
	}
	if info, err := f.AppendAsFollower(nil); err != nil || info.Batches != 0 {
		t.Fatalf("empty append: %+v %v", info, err)
	}
	// A gap inside one fetch.
	g := mustOpen(t, t.TempDir(), Options{})
	defer g.Close()
	b0, _ := leader.Read(0, 1, -1)
	b2, _ := leader.Read(4, 1, -1)
	if _, err := g.AppendAsFollower(append(append([]byte(nil), b0...), b2...)); !errors.Is(err, ErrNonContiguous) {
		t.Fatalf("gap: %v", err)
	}
	// A lower epoch than cached is appended and cached, dropping the later
	// entries, with a warning (LeaderEpochFileCache.assign).
	low := makeBatch(1, 10, 0)
	info, err = f.AppendAsLeader(low, 2)
	if err != nil || len(info.Warnings) != 1 {
		t.Fatalf("lower epoch: %+v, %v", info, err)
	}
	if e := f.Epochs(); e[len(e)-1] != (checkpoint.EpochEntry{Epoch: 2, StartOffset: info.FirstOffset}) {
		t.Fatalf("epochs after a lower epoch's append: %v", e)
	}
}

func TestTruncateTo(t *testing.T) {
	type step struct {
		to      int64
		wantLEO int64
	}
	tests := []struct {
		name       string
		steps      []step
		wantEpochs []checkpoint.EpochEntry
	}{
		{"no-op at LEO", []step{{60, 60}}, []checkpoint.EpochEntry{ep(0, 0), ep(2, 30), ep(5, 45)}},
		{"batch boundary", []step{{42, 42}}, []checkpoint.EpochEntry{ep(0, 0), ep(2, 30)}},
		{"mid batch drops the batch", []step{{40, 39}}, []checkpoint.EpochEntry{ep(0, 0), ep(2, 30)}},
		{"epoch start", []step{{45, 45}}, []checkpoint.EpochEntry{ep(0, 0), ep(2, 30)}},
		{"to zero", []step{{0, 0}}, nil},
		{"twice", []step{{50, 48}, {31, 30}}, []checkpoint.EpochEntry{ep(0, 0)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{SegmentBytes: 1200, IndexIntervalBytes: 250}
			l := mustOpen(t, dir, opts)
			appendN(t, l, 10, 3, 0, 0) // [0,30)
			appendN(t, l, 5, 3, 2, 10) // [30,45)
			appendN(t, l, 5, 3, 5, 20) // [45,60)
			for _, s := range tc.steps {
				// The new LEO is reported before anything on disk changes,
				// and only when records are cut.
				leoBefore, bytesBefore := l.LogEndOffset(), dirLogBytes(t, dir)
				reported := []int64{}
				got, err := l.TruncateToRecording(s.to, func(end int64) {
					if b := dirLogBytes(t, dir); b != bytesBefore {
						t.Errorf("TruncateToRecording(%d) reported with %d segment bytes on disk, want the uncut %d", s.to, b, bytesBefore)
					}
					reported = append(reported, end)
				})
				if err != nil || got != s.wantLEO || l.LogEndOffset() != s.wantLEO {
					t.Fatalf("TruncateTo(%d) = %d, %v; LEO %d; want %d", s.to, got, err, l.LogEndOffset(), s.wantLEO)
				}
				if want := []int64{s.wantLEO}; s.wantLEO == leoBefore {
					if len(reported) != 0 {
						t.Fatalf("TruncateToRecording(%d) at the LEO reported %v, want nothing", s.to, reported)
					}
				} else if !reflect.DeepEqual(reported, want) {
					t.Fatalf("TruncateToRecording(%d) reported %v, want %v", s.to, reported, want)
				}
			}
			if !reflect.DeepEqual(l.Epochs(), tc.wantEpochs) {
				t.Fatalf("epochs %v, want %v", l.Epochs(), tc.wantEpochs)
			}
			before := readAll(t, l)
			leo := l.LogEndOffset()
			// Appending after truncation continues at the new LEO.
			appendN(t, l, 2, 1, 7, 77)
			l.Close()
			l = mustOpen(t, dir, opts)
			defer l.Close()
			if l.LogEndOffset() != leo+2 {
				t.Fatalf("LEO after reopen %d, want %d", l.LogEndOffset(), leo+2)
			}
			if got := readAll(t, l); !bytes.Equal(got[:len(before)], before) {
				t.Fatal("prefix changed across reopen")
			}
			if e := l.Epochs(); e[len(e)-1] != (checkpoint.EpochEntry{Epoch: 7, StartOffset: leo}) {
				t.Fatalf("epochs after re-append %v", e)
			}
		})
	}
}

// dirLogBytes is the size of every segment file in dir.
func dirLogBytes(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"+segmentSuffix))
	if err != nil {
		t.Fatal(err)
	}
	n := int64(0)
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{})
	appendN(t, l, 3, 2, 1, 0)
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 100 || l.LogEndOffset() != 100 || len(l.Epochs()) != 0 {
		t.Fatalf("start %d end %d epochs %v", l.LogStartOffset(), l.LogEndOffset(), l.Epochs())
	}
	if _, err := l.Read(0, 10, -1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	appendN(t, l, 1, 2, 3, 0)
	// Truncating below the log start restarts the log there.
	if got, err := l.TruncateTo(50); err != nil || got != 50 || l.LogStartOffset() != 50 {
		t.Fatalf("TruncateTo below start: %d %v start %d", got, err, l.LogStartOffset())
	}
	appendN(t, l, 1, 2, 3, 0)
	l.Close()
	l = mustOpen(t, dir, Options{})
	defer l.Close()
	if l.LogStartOffset() != 50 || l.LogEndOffset() != 52 {
		t.Fatalf("after reopen start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
}

func TestEndOffsetFor(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{})
	defer l.Close()
	if e, o := l.EndOffsetFor(0); e != UndefinedEpoch || o != UndefinedOffset {
		t.Fatalf("empty cache: %d %d", e, o)
	}
	appendN(t, l, 2, 5, 2, 0)                   // epoch 2 at 0
	appendN(t, l, 2, 5, 4, 0)                   // epoch 4 at 10
	if _, err := l.AssignEpoch(7); err != nil { // epoch 7 at LEO 20, no data yet
		t.Fatal(err)
	}
	tests := []struct {
		req       int32
		wantEpoch int32
		wantOff   int64
	}{
		{-1, UndefinedEpoch, UndefinedOffset},
		{0, 0, 0},  // before every entry: requested epoch, first start
		{2, 2, 10}, // end of epoch 2 = start of 4
		{3, 2, 10}, // unknown middle epoch: largest <= 3 is 2
		{4, 4, 20}, // epoch 4 ended where 7 started
		{6, 4, 20}, //
		{7, 7, 20}, // latest: LEO
		{8, UndefinedEpoch, UndefinedOffset},
	}
	for _, tc := range tests {
		if e, o := l.EndOffsetFor(tc.req); e != tc.wantEpoch || o != tc.wantOff {
			t.Errorf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", tc.req, e, o, tc.wantEpoch, tc.wantOff)
		}
	}
	appendN(t, l, 1, 5, 7, 0)
	if e, o := l.EndOffsetFor(7); e != 7 || o != 25 {
		t.Errorf("latest after append: (%d, %d)", e, o)
	}
	if w, _ := l.AssignEpoch(5); w == "" {
		t.Error("assigning a lower epoch gave no warning")
	}
}

func TestEpochFileFormat(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{})
	appendN(t, l, 2, 3, 0, 0)
	appendN(t, l, 1, 3, 3, 0)
	l.Close()
	data, err := os.ReadFile(filepath.Join(dir, "leader-epoch-checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "0\n2\n0 0\n3 6\n"; string(data) != want {
		t.Fatalf("leader-epoch-checkpoint %q, want %q", data, want)
	}
}

func ep(epoch int32, start int64) checkpoint.EpochEntry {
	return checkpoint.EpochEntry{Epoch: epoch, StartOffset: start}
}

// Log.truncateTo (Kafka 2.6.3) at or past the LEO cuts no record but still
// drops the epoch entries starting at the LEO: an epoch this replica was
// assigned as leader and never wrote in. A follower asking its new leader
// about that epoch again and again would never finish truncating.
func TestTruncateAtLEODropsEmptyEpoch(t *testing.T) {
	tests := []struct {
		name string
		to   int64
	}{
		{"at the LEO", 30},
		{"past the LEO", 45},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := mustOpen(t, t.TempDir(), Options{})
			defer l.Close()
			appendN(t, l, 10, 3, 0, 0) // [0,30) in epoch 0
			if _, err := l.AssignEpoch(4); err != nil {
				t.Fatal(err)
			}
			if got, err := l.TruncateTo(tc.to); err != nil || got != 30 {
				t.Fatalf("TruncateTo(%d) = %d, %v; want 30", tc.to, got, err)
			}
			if want := []checkpoint.EpochEntry{ep(0, 0)}; !reflect.DeepEqual(l.Epochs(), want) {
				t.Fatalf("epochs %v, want %v", l.Epochs(), want)
			}
		})
	}
}
