package dataplane

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkLeaderProduce is the leader's produce path in process (no
// network, no followers: ISR of one): check the producer's sequence
// (idempotent only), validate and append the batch, answer. One op is one 100-record batch of
// 100-byte values, acks=1.
func BenchmarkLeaderProduce(b *testing.B) {
	vals := make([]string, 100)
	for i := range vals {
		vals[i] = fmt.Sprintf("%0100d", i)
	}
	for _, idem := range []bool{false, true} {
		b.Run(fmt.Sprintf("idempotent=%v", idem), func(b *testing.B) {
			m, err := Open(Config{BrokerID: 1, DataDir: b.TempDir(), MinISR: 1, LagTime: time.Hour, CheckpointInterval: time.Hour}, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			lead(b, m, 0, 1)
			plain := batch(vals...)
			b.SetBytes(int64(len(plain)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rec := plain
				if idem {
					b.StopTimer() // building the batch is the client's work
					rec = idemBatch(1, 0, int32(i*len(vals)), vals...)
					b.StartTimer()
				}
				if r := produce(m, 0, 1, time.Second, rec); r.ErrorCode != 0 {
					b.Fatalf("produce: %d", r.ErrorCode)
				}
			}
		})
	}
}
