package storage

import (
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/zkchaos/zkchaos/node/storage/checkpoint"
)

func TestPartitionDirs(t *testing.T) {
	data := t.TempDir()
	for _, tp := range []checkpoint.TopicPartition{{Topic: "my-topic", Partition: 10}, {Topic: "a", Partition: 0}, {Topic: "my-topic", Partition: 2}} {
		if err := os.MkdirAll(PartitionDir(data, tp.Topic, tp.Partition), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(data, "not-a-partition-x"), 0o755)
	os.Mkdir(filepath.Join(data, "t-01"), 0o755)
	os.WriteFile(filepath.Join(data, checkpoint.ReplicationOffsetFile), []byte("0\n0\n"), 0o644)
	got, err := ListPartitions(data)
	want := []checkpoint.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "my-topic", Partition: 2}, {Topic: "my-topic", Partition: 10}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ListPartitions = %v, %v; want %v", got, err, want)
	}
	if got, err := ListPartitions(filepath.Join(data, "missing")); err != nil || got != nil {
		t.Fatalf("missing dir: %v %v", got, err)
	}
}

// TestConcurrentAppendRead runs readers against a log being appended to
// and truncated (run with -race): every read returns whole, valid,
// contiguous batches.
func TestConcurrentAppendRead(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{SegmentBytes: 8 << 10, IndexIntervalBytes: 1024})
	defer l.Close()
	var wg sync.WaitGroup
	done := make(chan struct{})
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				from := l.LogStartOffset()
				b, err := l.Read(from, 4096, -1)
				if err != nil {
					t.Error(err)
					return
				}
				headers, n, err := SplitBatches(b)
				if err != nil || n != len(b) {
					t.Errorf("read returned bad batches: %v", err)
					return
				}
				for i := 1; i < len(headers); i++ {
					if headers[i].BaseOffset != headers[i-1].LastOffset()+1 {
						t.Errorf("non-contiguous read")
						return
					}
				}
			}
		}()
	}
	for i := 0; i < 300; i++ {
		if _, err := l.AppendAsLeader(makeBatch(1+i%5, 50, i), int32(i/100)); err != nil {
			t.Fatal(err)
		}
		if i%97 == 96 {
			if _, err := l.TruncateTo(l.LogEndOffset() - 3); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	wg.Wait()
}
