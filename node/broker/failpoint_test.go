package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/wire"
)

func um(controllerEpoch int32, brokerEpoch int64) *kmsg.UpdateMetadataRequest {
	r := kmsg.NewPtrUpdateMetadataRequest()
	r.SetVersion(6)
	r.ControllerID, r.ControllerEpoch, r.BrokerEpoch = 9, controllerEpoch, brokerEpoch
	return r
}

// broker-after-register fires on the first control request of each
// registration, whatever its API, and on no other.
func TestAfterRegisterFiresOncePerRegistration(t *testing.T) {
	tests := []struct {
		name string
		reqs func(b *Broker) // the requests handled after the first registration
		want int             // firings
	}{
		{"leader-and-isr first", func(b *Broker) {
			b.HandleLeaderAndIsr(wire.RequestHeader{}, lai(5, 100, 1, 1, 2))
			b.HandleUpdateMetadata(wire.RequestHeader{}, um(5, 100))
		}, 1},
		{"update-metadata first", func(b *Broker) {
			b.HandleUpdateMetadata(wire.RequestHeader{}, um(5, 100))
			b.HandleLeaderAndIsr(wire.RequestHeader{}, lai(5, 100, 1, 1, 2))
		}, 1},
		{"re-registration fires again", func(b *Broker) {
			b.HandleUpdateMetadata(wire.RequestHeader{}, um(5, 100))
			b.SetEpoch(200)
			b.HandleUpdateMetadata(wire.RequestHeader{}, um(5, 200))
			b.HandleUpdateMetadata(wire.RequestHeader{}, um(5, 200))
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp := failpoint.New()
			var mu sync.Mutex
			fired := 0
			fp.OnHit = func(h failpoint.Hit) {
				mu.Lock()
				defer mu.Unlock()
				if h.Name == failpoint.BrokerAfterRegister && h.Phase == "start" {
					fired++
				}
			}
			if err := fp.Arm(failpoint.BrokerAfterRegister, failpoint.Action{Kind: failpoint.ActSleep, Sleep: time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			b := New(1, nil, nil)
			b.FP = fp
			// Before any registration nothing fires (the node handles no
			// control request then, but a stray one must not use it up).
			b.HandleUpdateMetadata(wire.RequestHeader{}, um(5, -1))
			b.SetEpoch(100)
			tt.reqs(b)
			if fired != tt.want {
				t.Fatalf("fired %d times, want %d", fired, tt.want)
			}
		})
	}
}

// A pause at broker-after-register holds the first request: the partition
// is not applied until release. An error refuses the request unapplied.
func TestAfterRegisterHoldsAndRefuses(t *testing.T) {
	fp := failpoint.New()
	fp.Arm(failpoint.BrokerAfterRegister, failpoint.Action{Kind: failpoint.ActPause, Count: 1})
	b := New(1, nil, nil)
	b.FP = fp
	b.SetEpoch(100)
	done := make(chan *kmsg.LeaderAndISRResponse, 1)
	go func() { done <- b.HandleLeaderAndIsr(wire.RequestHeader{}, lai(5, 100, 1, 1, 2)) }()
	time.Sleep(50 * time.Millisecond)
	if _, ok := b.Replicas.Get(history.TP("t", 0)); ok {
		t.Fatal("partition applied while the first request is held")
	}
	select {
	case <-done:
		t.Fatal("first request answered while held")
	default:
	}
	if err := fp.Release(failpoint.BrokerAfterRegister); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.ErrorCode != 0 || r.Partitions[0].ErrorCode != 0 {
		t.Fatalf("released request: %+v", r)
	}

	fp.Arm(failpoint.BrokerAfterRegister, failpoint.Action{Kind: failpoint.ActError, Count: 1})
	b.SetEpoch(200)
	if r := b.HandleLeaderAndIsr(wire.RequestHeader{}, lai(5, 200, 2, 1, 2)); r.ErrorCode != kerr.UnknownServerError.Code {
		t.Fatalf("error action: top-level code %d, want %d", r.ErrorCode, kerr.UnknownServerError.Code)
	}
	if p, _ := b.Replicas.Get(history.TP("t", 0)); p.LeaderEpoch != 1 {
		t.Fatalf("refused request applied: leader epoch %d", p.LeaderEpoch)
	}
	if r := b.HandleLeaderAndIsr(wire.RequestHeader{}, lai(5, 200, 2, 1, 2)); r.ErrorCode != 0 {
		t.Fatalf("second request after the refused one: %d", r.ErrorCode)
	}
}
