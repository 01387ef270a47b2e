package checkers

import (
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// graceMs is staleEpochGrace in the builder's milliseconds.
const graceMs = int64(staleEpochGrace / 1e6)

// bounceUnderController starts broker 3 (czxid 50), elects controller 1 at
// epoch 3, then restarts broker 3 at +1 s with czxid 80, and returns the
// new registration's index.
func bounceUnderController(b *hb.Builder) int {
	process(b, 3, 50)
	elected(b, 1, 3, 40)
	b.At(1000)
	return process(b, 3, 80)
}

// staleLAI has controller 1 (epoch 3) send broker 3, at ms, a LeaderAndIsr
// carrying broker epoch carried with correlation id corr, and broker 3's
// process (broker epoch 80) reject it with STALE_BROKER_EPOCH when reject
// is set. It returns the send and the receipt (-1 without one).
func staleLAI(b *hb.Builder, ms int64, corr int32, carried int64, reject bool) (int, int) {
	c := lai(3, carried, "", 0)
	c.CorrelationID = corr
	b.At(ms)
	s := attempt(b, 1, 3, c, carried, 1)
	if !reject {
		return s, -1
	}
	c.Verdict, c.ErrorCode, c.OwnBrokerEpoch = history.VerdictRejected, history.ErrStaleBrokerEpoch, 80
	return s, b.Control(3, c)
}

// KIP-380's controller side: a controller that goes on sending a broker
// its previous broker epoch past the grace, with no fault to excuse it.
func TestBrokerFencingStaleEpoch(t *testing.T) {
	runCases(t, BrokerFencing{}, []tcase{
		// Mutant 04's shape: the controller processed the broker change
		// and kept the old czxid; every request it sends is refused.
		{name: "controller keeps the previous epoch past the grace", want: Invalid,
			explain: "controller 1 (epoch 3) kept sending broker 3 its previous broker epoch 50 after the broker re-registered with broker epoch 80", build: func(b *hb.Builder) []int {
				reg := bounceUnderController(b)
				first, rej := staleLAI(b, 1200, 1, 50, true)
				late, _ := staleLAI(b, 1200+graceMs+500, 2, 50, true)
				last, _ := staleLAI(b, 1200+graceMs+900, 3, 50, true)
				return []int{reg, first, rej, late, last}
			}},
		{name: "rejections counted", want: Invalid, explain: "3 requests from event", build: func(b *hb.Builder) []int {
			bounceUnderController(b)
			staleLAI(b, 1200, 1, 50, true)
			staleLAI(b, 1200+graceMs+500, 2, 50, true)
			staleLAI(b, 1200+graceMs+900, 3, 50, false)
			return nil
		}},
		// Kafka sends the old epoch until it has processed the broker
		// change: a request queued before it is refused once.
		{name: "stale request queued before the broker change", want: Valid, build: func(b *hb.Builder) []int {
			bounceUnderController(b)
			staleLAI(b, 1001, 1, 50, true)
			staleLAI(b, 1200, 2, 80, false)
			staleLAI(b, 1200+graceMs+500, 3, 80, false)
			return nil
		}},
		{name: "controller held while the broker bounced, caught up after", want: Valid, build: func(b *hb.Builder) []int {
			process(b, 3, 50)
			elected(b, 1, 3, 40)
			b.At(500).Fault(true, "f1", "pause", "n1")
			b.At(1000)
			process(b, 3, 80)
			// Its send thread retries while the event thread is held.
			staleLAI(b, 1000+graceMs+500, 1, 50, true)
			b.At(1000+3*graceMs).Fault(false, "f1", "pause", "n1")
			staleLAI(b, 1000+3*graceMs+1, 2, 50, true)
			staleLAI(b, 1000+3*graceMs+200, 3, 80, false)
			return nil
		}},
		{name: "controller at its own failpoint", want: Valid, build: func(b *hb.Builder) []int {
			bounceUnderController(b)
			b.At(1100).Add(history.Event{Kind: history.KindFaultStart, Node: 1, Fault: &history.Fault{ID: "fp1", Name: "failpoint",
				Targets: []string{"n1"}, Failpoint: "controller-after-zk-write"}})
			staleLAI(b, 1100+graceMs+500, 1, 50, true)
			return nil
		}},
		{name: "controller cut from ZooKeeper", want: Valid, build: func(b *hb.Builder) []int {
			bounceUnderController(b)
			b.At(1100).Fault(true, "f1", "isolate-controller", "n1", "|", "n2", "n3", "zk1", "zk2", "zk3")
			staleLAI(b, 1100+graceMs+500, 1, 50, true)
			return nil
		}},
		{name: "ZooKeeper leader cut from its followers", want: Valid, build: func(b *hb.Builder) []int {
			bounceUnderController(b)
			b.At(1100).Fault(true, "f1", "isolate-zk-leader", "zk2", "|", "zk1", "zk3")
			staleLAI(b, 1100+graceMs+500, 1, 50, true)
			return nil
		}},
		// A controller cut from the other brokers still reads ZooKeeper.
		{name: "controller cut from the brokers only", want: Invalid, explain: "past the 3s grace", build: func(b *hb.Builder) []int {
			bounceUnderController(b)
			b.At(1100).Fault(true, "f1", "kill-lagging-leader", "n1", "|", "n2", "n3")
			_, rej := staleLAI(b, 1200, 1, 50, true)
			late, _ := staleLAI(b, 1100+graceMs+500, 2, 50, false)
			return []int{rej, late}
		}},
		{name: "a fault on another broker is no excuse", want: Invalid, explain: "past the 3s grace", build: func(b *hb.Builder) []int {
			bounceUnderController(b)
			b.At(1100).Fault(true, "f1", "pause", "n2")
			late, rej := staleLAI(b, 1100+graceMs+500, 1, 50, true)
			return []int{late, rej}
		}},
		{name: "grace counted from the end of the controller's fault", want: Valid, build: func(b *hb.Builder) []int {
			bounceUnderController(b)
			b.At(1100).Fault(true, "f1", "pause", "n1")
			b.At(1100+2*graceMs).Fault(false, "f1", "pause", "n1")
			staleLAI(b, 1100+2*graceMs+graceMs/2, 1, 50, true)
			return nil
		}},
		{name: "grace counted from the end of the controller's fault, exceeded", want: Invalid, explain: "past the 3s grace", build: func(b *hb.Builder) []int {
			bounceUnderController(b)
			b.At(1100).Fault(true, "f1", "pause", "n1")
			stop := b.At(1100+2*graceMs).Fault(false, "f1", "pause", "n1")
			late, rej := staleLAI(b, 1100+3*graceMs+500, 1, 50, true)
			_ = stop
			return []int{late, rej}
		}},
	})
}

// The stale-epoch rule judges only the acting controller, and only a
// refused request to a broker's newest registration.
func TestBrokerFencingStaleEpochPremises(t *testing.T) {
	runCases(t, BrokerFencing{}, []tcase{
		// A superseded controller is a zombie: the controller-epoch rules
		// judge what it sends.
		{name: "superseded controller", want: Valid, build: func(b *hb.Builder) []int {
			bounceUnderController(b)
			b.At(1100)
			elected(b, 2, 4, 90)
			staleLAI(b, 1100+graceMs+500, 1, 50, true)
			return nil
		}},
		{name: "controller resigned", want: Valid, build: func(b *hb.Builder) []int {
			bounceUnderController(b)
			b.At(1100).Add(history.Event{Kind: history.KindControllerResigned, Node: 1, Controller: &history.ControllerRun{Epoch: 3}})
			staleLAI(b, 1100+graceMs+500, 1, 50, true)
			return nil
		}},
		// Without a refusal nothing shows the broker's new process was
		// left out.
		{name: "late stale sends never answered", want: Valid, build: func(b *hb.Builder) []int {
			bounceUnderController(b)
			staleLAI(b, 1100+graceMs+500, 1, 50, false)
			staleLAI(b, 1100+graceMs+900, 2, 50, false)
			return nil
		}},
		// KAFKA-7235's switch sends no epoch: the rule on what a request
		// reached judges those.
		{name: "no broker epoch carried", want: Valid, build: func(b *hb.Builder) []int {
			bounceUnderController(b)
			staleLAI(b, 1100+graceMs+500, 1, -1, false)
			return nil
		}},
		// The registration the watcher saw last is the premise: a broker
		// the listing no longer shows has no new process to leave out.
		{name: "broker unregistered again", want: Valid, build: func(b *hb.Builder) []int {
			bounceUnderController(b)
			b.At(1100).Brokers(1, 2)
			staleLAI(b, 1100+graceMs+500, 1, 50, true)
			return nil
		}},
		// A rejection that pairs with no logged attempt (older histories)
		// still counts, by controller, epoch and the epoch carried.
		{name: "rejection without attempt numbers", want: Invalid, explain: "rejected 1 of them", build: func(b *hb.Builder) []int {
			reg := bounceUnderController(b)
			c := lai(3, 50, "", 0)
			b.At(1100 + graceMs + 500)
			s := sent(b, 1, 3, c)
			c.Verdict, c.ErrorCode, c.OwnBrokerEpoch, c.CorrelationID = history.VerdictRejected, history.ErrStaleBrokerEpoch, 80, 99
			rej := b.Control(3, c)
			return []int{reg, s, rej}
		}},
		{name: "controller elected after the registration", want: Valid, build: func(b *hb.Builder) []int {
			process(b, 3, 50)
			b.At(1000)
			process(b, 3, 80)
			b.At(1000 + 2*graceMs)
			elected(b, 1, 3, 90)
			staleLAI(b, 1000+2*graceMs+200, 1, 50, true)
			return nil
		}},
		{name: "trimmed history without elections", want: Valid, build: func(b *hb.Builder) []int {
			process(b, 3, 50)
			b.At(1000)
			process(b, 3, 80)
			staleLAI(b, 1000+graceMs+500, 1, 50, true)
			return nil
		}},
	})
}

func TestFaultOnController(t *testing.T) {
	for _, tc := range []struct {
		name    string
		node    int32
		targets []string
		want    bool
	}{
		{"paused", 0, []string{"n1"}, true},
		{"another broker paused", 0, []string{"n2"}, false},
		{"isolated", 0, []string{"n1", "|", "n2", "n3", "zk1", "zk2", "zk3"}, true},
		{"cut from the brokers only", 0, []string{"n1", "|", "n2", "n3"}, false},
		{"link to a broker slowed", 0, []string{"n1", "->", "n2"}, false},
		{"link to ZooKeeper slowed", 0, []string{"n1", "->", "zk2"}, true},
		{"ZooKeeper follower paused", 0, []string{"zk3"}, true},
		{"ZooKeeper link slowed", 0, []string{"zk3", "->", "zk1"}, true},
		{"its own failpoint", 1, nil, true},
		{"another node's failpoint", 2, []string{"n2"}, false},
		{"not applied", 0, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := history.FaultWindow{Start: history.Event{Kind: history.KindFaultStart, Node: tc.node,
				Fault: &history.Fault{ID: "f", Name: "x", Targets: tc.targets}}}
			if got := faultOnController(&w, 1); got != tc.want {
				t.Errorf("faultOnController(%v) = %v, want %v", tc.targets, got, tc.want)
			}
		})
	}
}
