package dataplane

import (
	"slices"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
)

// A follower whose log a machine crash cut (crash-lose-unflushed: the page
// cache is lost, the segment keeps only what was fsynced) comes back and
// fetches from below the offset it had fetched before, under a leader that
// kept leading. Replica.updateFetchState (2.6.3) takes every fetch offset
// as the follower's log end offset, backwards too, and a leader that was
// not newly elected keeps its followers' state across the controller's
// LeaderAndIsr (Partition.makeLeader resets it only for a new leader). So
// the restarted follower must not be taken back into the ISR, nor counted
// for the high watermark, on what its previous process held: only once it
// fetched back up to the high watermark (Partition.maybeExpandIsr).
func TestFollowerFetchOffsetGoesBackAfterItsLogWasCut(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 1)
	store := newFakeISRStore(false)
	m.testISRStore = store
	state := func(epoch int32, isr ...int32) broker.Partition {
		return broker.Partition{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: epoch, ISR: isr, Replicas: []int32{1, 2, 3}}
	}
	if err := m.BecomeLeader(state(3, 1, 2)); err != nil {
		t.Fatal(err)
	}
	if r := produce(m, 0, 1, time.Second, batch("a", "b", "c")); r.ErrorCode != 0 {
		t.Fatalf("produce: %+v", r)
	}
	p := m.get(history.TP("t", 0))
	if f := fetch(m, 2, 0, 3); f.ErrorCode != 0 || f.HighWatermark != 3 {
		t.Fatalf("follower 2 caught up at 3: error %d, HW %d", f.ErrorCode, f.HighWatermark)
	}
	// Broker 2 crashes; the controller takes it out of the ISR at the next
	// leader epoch, and this broker stays leader (not a new leader).
	if err := m.BecomeLeader(state(4, 1)); err != nil {
		t.Fatal(err)
	}
	// Restarted with its log cut to nothing, broker 2 fetches from 0.
	if f := fetch(m, 2, 0, 0); f.ErrorCode != 0 {
		t.Fatalf("follower 2 fetch from 0: error %d", f.ErrorCode)
	}
	p.mu.Lock()
	leo, hw, isr := p.followers[2].leo, p.hw, slices.Clone(p.isr)
	p.mu.Unlock()
	if leo != 0 {
		t.Errorf("after broker 2 fetched from 0 the leader sees its log end at %d, want 0 (the fetch offset, even below the previous one)", leo)
	}
	if !slices.Equal(isr, []int32{1}) || len(store.written()) != 0 {
		t.Errorf("broker 2 fetched from 0 below the high watermark %d and was taken into the ISR: ISR %v, ZooKeeper writes %v", hw, isr, store.written())
	}
	if hw != 3 {
		t.Errorf("HW %d, want 3", hw)
	}
	// Once it has fetched back up to the high watermark it rejoins.
	if f := fetch(m, 2, 0, 3); f.ErrorCode != 0 {
		t.Fatalf("follower 2 fetch from 3: error %d", f.ErrorCode)
	}
	eventually(t, "broker 2 back in the ISR at 3", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return slices.Equal(p.isr, []int32{1, 2})
	})
}
