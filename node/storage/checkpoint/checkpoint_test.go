package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReplicationOffsetsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	hws := map[TopicPartition]int64{
		{"orders", 1}: 42, {"orders", 0}: 7, {"a-b.c_d", 2}: 0,
	}
	if err := WriteReplicationOffsets(dir, hws); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, ReplicationOffsetFile))
	if want := "0\n3\na-b.c_d 2 0\norders 0 7\norders 1 42\n"; string(data) != want {
		t.Fatalf("file %q, want %q", data, want)
	}
	if _, err := os.Stat(filepath.Join(dir, ReplicationOffsetFile+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
	got, ok, err := ReadReplicationOffsets(dir)
	if err != nil || !ok || !reflect.DeepEqual(got, hws) {
		t.Fatalf("read back %v %v %v", got, ok, err)
	}
	// Exactly what it is given: a smaller map replaces the file.
	if err := WriteReplicationOffsets(dir, map[TopicPartition]int64{{"orders", 0}: 9}); err != nil {
		t.Fatal(err)
	}
	got, _, _ = ReadReplicationOffsets(dir)
	if len(got) != 1 || got[TopicPartition{"orders", 0}] != 9 {
		t.Fatalf("after rewrite %v", got)
	}
	if err := WriteReplicationOffsets(dir, map[TopicPartition]int64{}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, ReplicationOffsetFile)); string(data) != "0\n0\n" {
		t.Fatalf("empty map wrote %q", data)
	}
}

func TestReadMissing(t *testing.T) {
	got, ok, err := ReadReplicationOffsets(t.TempDir())
	if err != nil || ok || len(got) != 0 {
		t.Fatalf("missing file: %v %v %v", got, ok, err)
	}
	e, ok, err := ReadEpochs(filepath.Join(t.TempDir(), LeaderEpochFile))
	if err != nil || ok || e != nil {
		t.Fatalf("missing epoch file: %v %v %v", e, ok, err)
	}
}

func TestWriteRejects(t *testing.T) {
	for _, hws := range []map[TopicPartition]int64{
		{{"", 0}: 1}, {{"a b", 0}: 1}, {{"t", -1}: 1}, {{"t", 0}: -5},
	} {
		if err := WriteReplicationOffsets(t.TempDir(), hws); err == nil {
			t.Errorf("%v accepted", hws)
		}
	}
}

func TestParseReplicationOffsetsErrors(t *testing.T) {
	tests := []struct {
		name, data string
		line       int
		reason     string
	}{
		{"empty", "", 0, "empty file"},
		{"no newline", "0\n1\nt 0 5", 0, "newline"},
		{"version", "1\n0\n", 1, "unsupported version"},
		{"version text", "v\n0\n", 1, "not a number"},
		{"count", "0\n-1\n", 2, "non-negative"},
		{"too few", "0\n2\nt 0 1\n", 0, "count line says 2"},
		{"too many", "0\n1\nt 0 1\nt 1 1\n", 0, "count line says 1"},
		{"fields", "0\n1\nt 0\n", 3, "3 space-separated"},
		{"partition", "0\n1\nt x 1\n", 3, "partition"},
		{"offset", "0\n2\nt 0 1\nt 1 -3\n", 4, "offset"},
		{"duplicate", "0\n2\nt 0 1\nt 0 2\n", 4, "duplicate"},
		{"blank line", "0\n1\n\n", 3, "fields"},
		{"only version", "0\n", 0, "too short"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseReplicationOffsets("/d/replication-offset-checkpoint", []byte(tc.data))
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v, want a ParseError", err)
			}
			if pe.Line != tc.line || !strings.Contains(pe.Reason, tc.reason) || !strings.Contains(err.Error(), "/d/replication-offset-checkpoint") {
				t.Fatalf("err %q: line %d, want line %d and %q", err, pe.Line, tc.line, tc.reason)
			}
		})
	}
}

func TestParseEpochs(t *testing.T) {
	got, err := ParseEpochs("f", []byte("0\n3\n0 0\n2 10\n5 10\n"))
	want := []EpochEntry{{0, 0}, {2, 10}, {5, 10}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%v %v", got, err)
	}
	if string(FormatEpochs(want)) != "0\n3\n0 0\n2 10\n5 10\n" {
		t.Fatal("format differs")
	}
	for _, bad := range []struct {
		data string
		line int
	}{
		{"0\n2\n3 0\n3 5\n", 4},      // epoch not increasing
		{"0\n2\n1 9\n3 5\n", 4},      // offset decreasing
		{"0\n1\n-1 0\n", 3},          // negative epoch
		{"0\n1\n1 0 0\n", 3},         // fields
		{"0\n1\n99999999999 0\n", 3}, // not int32
	} {
		_, err := ParseEpochs("f", []byte(bad.data))
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Line != bad.line {
			t.Errorf("%q: err %v, want line %d", bad.data, err, bad.line)
		}
	}
}

// A crash before the rename leaves the old file intact and a stale .tmp,
// which the next write replaces.
func TestWriteAtomicStaleTmp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteAtomic(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p+".tmp", []byte("half-writ"), 0o644)
	if data, _ := os.ReadFile(p); string(data) != "old" {
		t.Fatal("old contents lost")
	}
	if err := WriteAtomic(p, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(p); string(data) != "new" {
		t.Fatal("new contents not written")
	}
	if err := WriteAtomic(filepath.Join(dir, "missing", "f"), nil); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}
