package checkers

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// tcase is one hand-written history: build returns the events the result
// must name (for invalid) or nil.
type tcase struct {
	name    string
	build   func(b *hb.Builder) []int
	want    Verdict
	explain string // substring of the explanation
}

// verdictOf builds a history with build and checks it with c, failing the
// test unless the verdict is want; the result is left to the test's own
// assertions.
func verdictOf(t *testing.T, c Checker, build func(*hb.Builder), want Verdict) Result {
	t.Helper()
	b := hb.New()
	build(b)
	r := c.Check(b.History())
	if r.Verdict != want {
		t.Fatalf("verdict %s, want %s: %s", r.Verdict, want, r.Explanation)
	}
	return r
}

func runCases(t *testing.T, c Checker, cases []tcase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := hb.New()
			wantEvents := tc.build(b)
			r := c.Check(b.History())
			if r.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s: %s", r.Verdict, tc.want, r.Explanation)
			}
			if r.Checker != c.Name() {
				t.Errorf("checker name %q", r.Checker)
			}
			if !strings.Contains(r.Explanation, tc.explain) {
				t.Errorf("explanation %q does not contain %q", r.Explanation, tc.explain)
			}
			for _, e := range wantEvents {
				if !slices.Contains(r.Events, e) {
					t.Errorf("events %v do not include %d", r.Events, e)
				}
				if !regexp.MustCompile(`\b` + strconv.Itoa(e) + `\b`).MatchString(r.Explanation) {
					t.Errorf("explanation %q does not name event %d", r.Explanation, e)
				}
			}
			if tc.want == Invalid && len(r.Events) == 0 {
				t.Errorf("invalid without events")
			}
		})
	}
}

var tp0 = history.TP("t", 0)

func lai(ctrlEpoch int32, brokerEpoch int64, verdict string, known int32) history.Control {
	c := history.Control{API: history.APILeaderAndIsr, CorrelationID: 7, ControllerID: 1, ControllerEpoch: ctrlEpoch,
		BrokerEpoch: brokerEpoch, Verdict: verdict, KnownControllerEpoch: known, OwnBrokerEpoch: brokerEpoch,
		Partitions: []history.ControlPartition{{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: ctrlEpoch}}}
	if verdict == history.VerdictRejected {
		c.ErrorCode = history.ErrStaleControllerEpoch
	}
	return c
}

// process starts a new process of node that registers with broker epoch
// czxid, and returns the registration's index.
func process(b *hb.Builder, node int32, czxid int64) int {
	b.Start(node)
	return b.Register(node, czxid)
}

// sent records controller node ctrl handing c to the network for target.
func sent(b *hb.Builder, ctrl, target int32, c history.Control) int {
	c.Verdict, c.TargetBroker = "", target
	return b.Add(history.Event{Kind: history.KindControlSent, Node: ctrl, Control: &c})
}

// attempt appends a control_sent attempt that logs the broker epoch the
// controller meant (the node program's format since broker-fencing judges
// by consequence).
func attempt(b *hb.Builder, ctrl, target int32, c history.Control, meant int64, n int) int {
	c.Verdict, c.TargetBroker, c.MeantBrokerEpoch, c.Attempt = "", target, meant, n
	return b.Add(history.Event{Kind: history.KindControlSent, Node: ctrl, Control: &c})
}

func elected(b *hb.Builder, node, epoch int32, zxid int64) int {
	return b.Add(history.Event{Kind: history.KindControllerElected, Node: node, Controller: &history.ControllerRun{Epoch: epoch, EpochZkVersion: epoch, Zxid: zxid}})
}

func zkWrite(b *hb.Builder, node, epoch int32, zxid, start int64, outcome string) int {
	return b.Add(history.Event{Kind: history.KindZKWrite, Node: node, ZKWrite: &history.ZKWrite{Start: start,
		Path: "/brokers/topics/t/partitions/0/state", Op: "set", ControllerEpoch: epoch, Outcome: outcome, Zxid: zxid}})
}

// badVersionsAfterHeal heals a slow link at +50 ms, then has controller 2
// fail its partition-state write with BADVERSION n times from +200 ms, and
// returns the first and last failure.
func badVersionsAfterHeal(b *hb.Builder, n int) []int {
	b.Fault(true, "f1", "slow-link", "zk1", "zk3")
	b.At(50).Fault(false, "f1", "slow-link", "zk1", "zk3")
	b.At(200)
	var evs []int
	for range n {
		evs = append(evs, zkWrite(b, 2, 3, 0, 0, history.ZKBadVersion))
	}
	return []int{evs[0], evs[len(evs)-1]}
}

func TestControllerFencing(t *testing.T) {
	runCases(t, ControllerFencing{}, []tcase{
		{name: "epochs rise", want: Valid, build: func(b *hb.Builder) []int {
			b.Control(2, lai(1, 50, history.VerdictAccepted, 0))
			b.Control(2, lai(2, 50, history.VerdictAccepted, 1))
			b.Control(2, lai(1, 50, history.VerdictRejected, 2))
			return nil
		}},
		{name: "accepted epoch goes back", want: Invalid, explain: "after accepting epoch 4", build: func(b *hb.Builder) []int {
			b.Control(3, lai(3, 50, history.VerdictAccepted, 0))
			a := b.Control(2, lai(4, 50, history.VerdictAccepted, 3))
			s := b.Control(2, lai(3, 50, history.VerdictAccepted, 3)) // known misreported: the sequence still catches it
			return []int{a, s}
		}},
		{name: "accepted below known epoch", want: Invalid, explain: "already knew epoch 5", build: func(b *hb.Builder) []int {
			return []int{b.Control(2, lai(4, 50, history.VerdictAccepted, 5))}
		}},
		{name: "restart resets the broker's memory", want: Valid, build: func(b *hb.Builder) []int {
			b.Control(2, lai(4, 50, history.VerdictAccepted, 3))
			b.Start(2)
			b.Control(2, lai(3, 60, history.VerdictAccepted, 0))
			return nil
		}},
		{name: "write after supersession by zxid", want: Invalid, explain: "after epoch 2 had been elected", build: func(b *hb.Builder) []int {
			elected(b, 1, 1, 10)
			e2 := elected(b, 2, 2, 20)
			w := zkWrite(b, 1, 1, 30, 0, history.ZKOK)
			return []int{e2, w}
		}},
		{name: "write landed before election, logged after", want: Valid, build: func(b *hb.Builder) []int {
			elected(b, 1, 1, 10)
			elected(b, 2, 2, 20)
			zkWrite(b, 1, 1, 15, 0, history.ZKOK)
			zkWrite(b, 1, 1, 0, 0, history.ZKBadVersion)
			return nil
		}},
		{name: "write issued after election, no zxids", want: Invalid, explain: "was not fenced", build: func(b *hb.Builder) []int {
			b.Add(history.Event{Kind: history.KindControllerElected, Node: 1, Controller: &history.ControllerRun{Epoch: 1}})
			e2 := b.Add(history.Event{Kind: history.KindControllerElected, Node: 2, Controller: &history.ControllerRun{Epoch: 2}})
			w := zkWrite(b, 1, 1, 0, b.Now(), history.ZKOK)
			return []int{e2, w}
		}},
		{name: "write issued before election, no zxids", want: Valid, build: func(b *hb.Builder) []int {
			b.Add(history.Event{Kind: history.KindControllerElected, Node: 1, Controller: &history.ControllerRun{Epoch: 1}})
			start := b.Now()
			b.Add(history.Event{Kind: history.KindControllerElected, Node: 2, Controller: &history.ControllerRun{Epoch: 2}})
			zkWrite(b, 1, 1, 0, start, history.ZKOK)
			return nil
		}},
		{name: "partition state controller epoch decreases", want: Invalid, explain: "went back from controller_epoch 3", build: func(b *hb.Builder) []int {
			a := b.State(tp0, 1, 4, 3, 10, 1, 2)
			c := b.State(tp0, 2, 5, 2, 11, 2)
			return []int{a, c}
		}},
		{name: "partition state epochs rise", want: Valid, build: func(b *hb.Builder) []int {
			b.State(tp0, 1, 4, 3, 10, 1, 2)
			b.State(tp0, 2, 5, 4, 11, 2)
			return nil
		}},
		{name: "late-logged write without zxid is not ordered by time", want: Valid, build: func(b *hb.Builder) []int {
			b.State(tp0, 2, 5, 4, 11, 2)
			// A controller-1 write that landed earlier, logged late, no zxid.
			b.Add(history.Event{Kind: history.KindZKWrite, Node: 1, ZKWrite: &history.ZKWrite{Path: "/brokers/topics/t/partitions/0/state",
				Op: "set", ControllerEpoch: 3, Outcome: history.ZKOK,
				State: &history.PartitionState{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 4, ControllerEpoch: 3}}})
			return nil
		}},
		{name: "ISR write by a leader is not a controller write", want: Valid, build: func(b *hb.Builder) []int {
			elected(b, 2, 2, 20)
			zkWrite(b, 3, 1, 30, 0, history.ZKOK) // broker 3 never ran as controller
			return nil
		}},
	})
}

// shutdown is controller 1's record of handling broker's ControlledShutdown
// carrying epoch, when its cache held cached for the broker.
func shutdown(b *hb.Builder, broker int32, epoch, cached int64, verdict string) int {
	return b.Add(history.Event{Kind: history.KindControlledShutdown, Node: 1, Shutdown: &history.Shutdown{
		BrokerID: broker, BrokerEpoch: epoch, CachedBrokerEpoch: cached, ControllerEpoch: 1, Verdict: verdict}})
}

// shutdownSent is broker's own record of sending ControlledShutdown as the
// process with broker epoch meant.
func shutdownSent(b *hb.Builder, broker int32, meant int64) int {
	return b.Add(history.Event{Kind: history.KindControlledShutdown, Node: broker, Shutdown: &history.Shutdown{
		BrokerID: broker, BrokerEpoch: -1, MeantBrokerEpoch: meant, Verdict: history.VerdictSent}})
}

// A control request acted on must reach the broker process it was meant
// for (KAFKA-7235, KIP-380).
func TestBrokerFencing(t *testing.T) {
	runCases(t, BrokerFencing{}, []tcase{
		{name: "current epoch", want: Valid, build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			b.Control(2, lai(1, 50, history.VerdictAccepted, 0))
			shutdown(b, 2, 50, 50, history.VerdictAccepted)
			return nil
		}},
		{name: "previous generation accepted after restart", want: Invalid, explain: "stale broker epoch 50", build: func(b *hb.Builder) []int {
			r1 := process(b, 2, 50)
			r2 := process(b, 2, 80)
			c := lai(1, 50, history.VerdictAccepted, 0)
			c.OwnBrokerEpoch = 80
			q := b.Control(2, c)
			return []int{r1, r2, q}
		}},
		{name: "previous generation rejected", want: Valid, build: func(b *hb.Builder) []int {
			b.Register(2, 50)
			process(b, 2, 80)
			c := lai(1, 50, history.VerdictRejected, 0)
			c.ErrorCode = history.ErrStaleBrokerEpoch
			b.Control(2, c)
			return nil
		}},
		// The KAFKA-7235 switch alone (no broker epoch on the wire) does no
		// harm: only a request reaching another process is a violation.
		{name: "no broker epoch", want: Valid, explain: "1 of the requests carried no broker epoch", build: func(b *hb.Builder) []int {
			b.Register(2, 50)
			b.Control(2, lai(1, -1, history.VerdictAccepted, 0))
			return nil
		}},
		{name: "no broker epoch, queued for the previous process", want: Invalid, explain: "queued for its previous process", build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			c := lai(1, -1, history.VerdictAccepted, 0)
			q := sent(b, 1, 2, c)
			r2 := process(b, 2, 80)
			got := b.Control(2, c)
			return []int{q, r2, got}
		}},
		{name: "no broker epoch, sent again after the restart", want: Valid, build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			c := lai(1, -1, history.VerdictAccepted, 0)
			sent(b, 1, 2, c)
			process(b, 2, 80)
			sent(b, 1, 2, c)
			b.Control(2, c)
			return nil
		}},
		// Seed 101: the controller logged its send 16 µs before broker 3's
		// very first broker_registered; there was no previous process.
		{name: "registration race, first process", want: Valid, build: func(b *hb.Builder) []int {
			b.Start(3)
			c := lai(1, -1, history.VerdictAccepted, 0)
			sent(b, 1, 3, c)
			b.Register(3, 60)
			b.Control(3, c)
			return nil
		}},
		{name: "registration race, first process, meant epoch logged", want: Valid, build: func(b *hb.Builder) []int {
			b.Start(3)
			c := lai(1, -1, history.VerdictAccepted, 0)
			attempt(b, 1, 3, c, 60, 1)
			b.Register(3, 60)
			b.Control(3, c)
			return nil
		}},
	})
}

// Requests traced to the send attempt the controller logged, with the
// broker epoch it meant (Control.MeantBrokerEpoch).
func TestBrokerFencingMeantEpoch(t *testing.T) {
	runCases(t, BrokerFencing{}, []tcase{
		{name: "switch on, no restart, meant epoch logged", want: Valid, build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			c := lai(1, -1, history.VerdictAccepted, 0)
			attempt(b, 1, 2, c, 50, 1)
			b.Control(2, c)
			return nil
		}},
		{name: "queued for the previous process, retried into the new one", want: Invalid,
			explain: "meant for its previous process (broker epoch 50", build: func(b *hb.Builder) []int {
				r1 := process(b, 2, 50)
				c := lai(1, -1, history.VerdictAccepted, 0)
				c.OwnBrokerEpoch = 80
				attempt(b, 1, 2, c, 50, 1)
				r2 := process(b, 2, 80)
				c.CorrelationID = 8
				s := attempt(b, 1, 2, c, 50, 2)
				got := b.Control(2, c)
				rc := role(b, 2, 1, history.RoleFollower)
				tr := b.Add(history.Event{Kind: history.KindTruncation, Node: 2, Truncation: &history.Truncation{Topic: "t", Partition: 0, From: 10, To: 5}})
				cp := b.Add(history.Event{Kind: history.KindHWCheckpoint, Node: 2, Checkpoint: &history.Checkpoint{Entries: []history.CheckpointEntry{{Topic: "t", Partition: 0, HW: 5}}}})
				return []int{r1, r2, s, got, rc, tr, cp}
			}},
		// The controller's clock ran half a millisecond ahead of broker
		// 2's: the receipt sorts before its send in the merged history.
		{name: "receipt logged before its send by the clocks", want: Invalid,
			explain: "meant for its previous process (broker epoch 50", build: func(b *hb.Builder) []int {
				r1 := process(b, 2, 50)
				c := lai(1, -1, history.VerdictAccepted, 0)
				c.OwnBrokerEpoch = 80
				r2 := process(b, 2, 80)
				c.CorrelationID = 9
				at := b.Now()
				got := b.Add(history.Event{Time: at, Kind: history.KindControlRequest, Node: 2, Control: &c})
				sc := c
				sc.Verdict, sc.TargetBroker, sc.MeantBrokerEpoch, sc.Attempt, sc.OwnBrokerEpoch = "", 2, 50, 2, 0
				s := b.Add(history.Event{Time: at + 500_000, Kind: history.KindControlSent, Node: 1, Control: &sc})
				return []int{r1, r2, s, got}
			}},
		{name: "receipt logged before its send by the clocks, meant for the new process", want: Valid, build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			c := lai(1, -1, history.VerdictAccepted, 0)
			c.OwnBrokerEpoch = 80
			process(b, 2, 80)
			c.CorrelationID = 9
			at := b.Now()
			b.Add(history.Event{Time: at, Kind: history.KindControlRequest, Node: 2, Control: &c})
			sc := c
			sc.Verdict, sc.TargetBroker, sc.MeantBrokerEpoch, sc.Attempt, sc.OwnBrokerEpoch = "", 2, 80, 1, 0
			b.Add(history.Event{Time: at + 500_000, Kind: history.KindControlSent, Node: 1, Control: &sc})
			return nil
		}},
		{name: "consequences named", want: Invalid,
			explain: "became follower of t-0 at leader epoch 1", build: func(b *hb.Builder) []int {
				process(b, 2, 50)
				c := lai(1, -1, history.VerdictAccepted, 0)
				process(b, 2, 80)
				attempt(b, 1, 2, c, 50, 2)
				b.Control(2, c)
				role(b, 2, 1, history.RoleFollower)
				b.Add(history.Event{Kind: history.KindTruncation, Node: 2, Truncation: &history.Truncation{Topic: "t", Partition: 0, From: 10, To: 5}})
				return nil
			}},
		// A process that lost its ZooKeeper session re-registers (new
		// czxid) and may act on a request for the new registration before
		// logging it; a request for its first registration is still its own.
		{name: "same process re-registered, request for the new registration", want: Valid, build: func(b *hb.Builder) []int {
			process(b, 1, 306)
			c := lai(2, 379, history.VerdictAccepted, 1)
			c.OwnBrokerEpoch = 306
			attempt(b, 3, 1, c, 379, 1)
			b.Control(1, c)
			b.Register(1, 379)
			return nil
		}},
		{name: "same process re-registered, request for its first registration", want: Valid, build: func(b *hb.Builder) []int {
			process(b, 1, 306)
			b.Register(1, 379)
			c := lai(2, -1, history.VerdictAccepted, 1)
			c.OwnBrokerEpoch = 379
			attempt(b, 3, 1, c, 306, 1)
			b.Control(1, c)
			return nil
		}},
		{name: "resend meant for the new process", want: Valid, build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			c := lai(1, -1, history.VerdictAccepted, 0)
			attempt(b, 1, 2, c, 50, 1)
			process(b, 2, 80)
			c.CorrelationID = 1
			attempt(b, 1, 2, c, 80, 1)
			b.Control(2, c)
			return nil
		}},
		{name: "own epoch acted on before its registration line", want: Valid, build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			b.Start(2)
			// The watcher sees the new znode; the broker answers a request
			// carrying it before logging broker_registered.
			b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/brokers/ids", Type: history.WatchChildren,
				Brokers: []history.BrokerZnode{{ID: 2, Czxid: 80}}}})
			c := lai(1, 80, history.VerdictAccepted, 0)
			b.Control(2, c)
			b.Register(2, 80)
			return nil
		}},
		{name: "old epoch before the new process registered", want: Invalid, explain: "of an earlier process", build: func(b *hb.Builder) []int {
			r1 := b.Register(2, 50)
			b.Start(2)
			q := b.Control(2, lai(1, 50, history.VerdictAccepted, 0))
			return []int{r1, q}
		}},
	})
}

// A ControlledShutdown acted on must come from the broker process the
// controller's broker epoch names (KIP-380).
func TestBrokerFencingControlledShutdown(t *testing.T) {
	runCases(t, BrokerFencing{}, []tcase{
		{name: "stale controlled shutdown acted on", want: Invalid, explain: "re-registered with czxid 80", build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			r2 := process(b, 2, 80)
			s := shutdown(b, 2, 50, 80, history.VerdictAccepted)
			return []int{r2, s}
		}},
		// KIP-380 checks the controller's cached epoch: a request that came
		// before the broker change it had not yet processed is acted on by
		// Kafka too, a known anomaly.
		{name: "stale controlled shutdown queued before the broker change", want: Valid, explain: KnownQueuedShutdown, build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			shutdownSent(b, 2, 50)
			process(b, 2, 80)
			shutdown(b, 2, 50, 50, history.VerdictAccepted)
			return nil
		}},
		// The new process has sent its own request by the time the
		// controller acts on the queued one of the previous process: the
		// previous process's record still shows its request came first.
		{name: "stale controlled shutdown queued, the new process asked too", want: Valid, explain: KnownQueuedShutdown, build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			shutdownSent(b, 2, 50)
			process(b, 2, 80)
			shutdownSent(b, 2, 80)
			shutdown(b, 2, 50, 50, history.VerdictAccepted)
			return nil
		}},
		// Without the sender's record nothing shows the request came
		// first: a controller that missed the restart keeps the old epoch
		// in its cache too (KAFKA-7235).
		{name: "stale controlled shutdown, the controller's cache never updated", want: Invalid, explain: "re-registered with czxid 80", build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			r2 := process(b, 2, 80)
			s := shutdown(b, 2, 50, 50, history.VerdictAccepted)
			return []int{r2, s}
		}},
		{name: "stale controlled shutdown sent after the new process registered", want: Invalid, explain: "re-registered with czxid 80", build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			r2 := process(b, 2, 80)
			shutdownSent(b, 2, 50)
			s := shutdown(b, 2, 50, 50, history.VerdictAccepted)
			return []int{r2, s}
		}},
		{name: "epoch-less controlled shutdown of the previous process, queued before the broker change", want: Valid, explain: KnownQueuedShutdown, build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			shutdownSent(b, 2, 50)
			process(b, 2, 80)
			shutdown(b, 2, -1, 50, history.VerdictAccepted)
			return nil
		}},
		{name: "controlled shutdown of a process that re-registered after a session loss", want: Valid, build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			b.Register(2, 80) // same process, new session
			shutdown(b, 2, 50, 80, history.VerdictAccepted)
			return nil
		}},
		// KAFKA-7235's switch sends no broker epoch: the broker's own record
		// of the send says which process asked.
		{name: "epoch-less controlled shutdown from the current process", want: Valid, build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			process(b, 2, 80)
			shutdownSent(b, 2, 80)
			shutdown(b, 2, -1, 80, history.VerdictAccepted)
			return nil
		}},
		{name: "epoch-less controlled shutdown from the previous process acted on after the restart", want: Invalid, explain: "previous process (broker epoch 50) sent at event", build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			sent := shutdownSent(b, 2, 50)
			r2 := process(b, 2, 80)
			s := shutdown(b, 2, -1, 80, history.VerdictAccepted)
			return []int{s, sent, r2}
		}},
		{name: "epoch-less controlled shutdown with no record of its sender", want: Valid, build: func(b *hb.Builder) []int {
			process(b, 2, 50)
			process(b, 2, 80)
			shutdown(b, 2, -1, 80, history.VerdictAccepted)
			return nil
		}},
		{name: "stale controlled shutdown refused", want: Valid, build: func(b *hb.Builder) []int {
			b.Register(2, 50)
			b.Register(2, 80)
			shutdown(b, 2, 50, 80, history.VerdictRejected)
			return nil
		}},
	})
}

func role(b *hb.Builder, node int32, epoch int32, r string) int {
	return b.Add(history.Event{Kind: history.KindRoleChange, Node: node, Role: &history.Role{Topic: "t", Partition: 0, Role: r, Leader: node, LeaderEpoch: epoch}})
}

func appendEv(b *hb.Builder, kind history.Kind, node, epoch int32, base, last int64) int {
	return b.Add(history.Event{Kind: kind, Node: node, Append: &history.Append{Topic: "t", Partition: 0,
		BaseOffset: base, LastOffset: last, LeaderEpoch: epoch, Acks: history.AcksAll}})
}

func TestLeaderUniqueness(t *testing.T) {
	runCases(t, LeaderUniqueness{}, []tcase{
		{name: "leaders change epochs", want: Valid, build: func(b *hb.Builder) []int {
			role(b, 1, 1, history.RoleLeader)
			appendEv(b, history.KindProduceAppend, 1, 1, 0, 4)
			appendEv(b, history.KindProduceAck, 1, 1, 0, 4)
			role(b, 2, 2, history.RoleLeader)
			role(b, 1, 2, history.RoleFollower)
			appendEv(b, history.KindProduceAppend, 2, 2, 5, 9)
			appendEv(b, history.KindProduceAck, 2, 2, 5, 9)
			appendEv(b, history.KindProduceAck, 1, 1, 3, 4) // late ack below the new leader's: benign
			return nil
		}},
		{name: "two leaders at one epoch", want: Invalid, explain: "brokers 1 and 3 both acted as leader", build: func(b *hb.Builder) []int {
			a := role(b, 1, 5, history.RoleLeader)
			c := role(b, 3, 5, history.RoleLeader)
			return []int{a, c}
		}},
		{name: "two brokers append at one epoch", want: Invalid, explain: "at leader epoch 2", build: func(b *hb.Builder) []int {
			a := appendEv(b, history.KindProduceAppend, 1, 2, 0, 0)
			c := appendEv(b, history.KindProduceAppend, 2, 2, 0, 0)
			return []int{a, c}
		}},
		{name: "old leader acknowledges over the new leader", want: Invalid, explain: "two leaders acknowledged overlapping writes", build: func(b *hb.Builder) []int {
			appendEv(b, history.KindProduceAck, 1, 1, 0, 9)
			n := appendEv(b, history.KindProduceAck, 2, 2, 10, 10)
			z := appendEv(b, history.KindProduceAck, 1, 1, 10, 11)
			return []int{n, z}
		}},
	})
}

func produceOK(b *hb.Builder, proc int, value string, offset int64) (int, int) {
	return b.ProduceOK(proc, tp0, value, offset)
}

func finalRead(b *hb.Builder, recs ...history.Record) int {
	return b.ReadBack(99, tp0, 0, true, recs...)
}

func TestDurability(t *testing.T) {
	runCases(t, Durability{}, []tcase{
		{name: "acknowledged records read back", want: Valid, build: func(b *hb.Builder) []int {
			produceOK(b, 1, "a", 0)
			produceOK(b, 2, "b", 1)
			b.Produce(3, tp0, "c")
			b.Complete(3, history.OpInfo, tp0, history.FProduce, 0) // unknown, absent: fine
			finalRead(b, hb.Rec(0, "a"), hb.Rec(1, "b"))
			return nil
		}},
		{name: "acknowledged record lost", want: Invalid, explain: "was lost", build: func(b *hb.Builder) []int {
			produceOK(b, 1, "a", 0)
			i, o := produceOK(b, 2, "b", 1)
			f := finalRead(b, hb.Rec(0, "a"))
			return []int{i, o, f}
		}},
		{name: "acknowledged record overwritten", want: Invalid, explain: "was overwritten", build: func(b *hb.Builder) []int {
			i, o := produceOK(b, 1, "a", 0)
			f := finalRead(b, hb.Rec(0, "x"))
			return []int{i, o, f}
		}},
		{name: "offset read with two values", want: Invalid, explain: "with two values", build: func(b *hb.Builder) []int {
			r1 := b.ReadBack(1, tp0, 0, false, hb.Rec(0, "a"))
			r2 := b.ReadBack(1, tp0, 0, false, hb.Rec(0, "b"))
			return []int{r1, r2}
		}},
		{name: "acks=1 record may vanish", want: Valid, build: func(b *hb.Builder) []int {
			b.Op(history.ClientOp{Type: history.OpInvoke, Process: 1, F: history.FProduce, Topic: "t", Value: "a", Acks: history.AcksLeader})
			b.Op(history.ClientOp{Type: history.OpOK, Process: 1, F: history.FProduce, Topic: "t", Offset: 0})
			finalRead(b)
			return nil
		}},
		{name: "no final read", want: Unknown, explain: "no final read of t-0", build: func(b *hb.Builder) []int {
			produceOK(b, 1, "a", 0)
			return nil
		}},
	})
}

func checkpoint(b *hb.Builder, node int32, hosted []history.TopicPartition, entries ...history.CheckpointEntry) int {
	return b.Add(history.Event{Kind: history.KindHWCheckpoint, Node: node, Checkpoint: &history.Checkpoint{Entries: entries, Hosted: hosted}})
}

func cpe(p int32, hw int64) history.CheckpointEntry {
	return history.CheckpointEntry{Topic: "t", Partition: p, HW: hw}
}

func TestHWCheckpoint(t *testing.T) {
	runCases(t, HWCheckpoint{}, []tcase{
		{name: "restart keeps every partition", want: Valid, build: func(b *hb.Builder) []int {
			checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			b.Start(2)
			checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 4))
			return nil
		}},
		{name: "partition left out across restart and never told", want: Invalid, explain: "left out t-1 (HW 3, written by event 1), which the broker hosted", build: func(b *hb.Builder) []int {
			ctl := elected(b, 1, 1, 10)
			a := checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			s := b.Start(2)
			r := b.Register(2, 200)
			c := checkpoint(b, 2, nil, cpe(0, 5))
			b.At(2000).Phase()
			return []int{ctl, a, s, r, c}
		}},
		{name: "a replica reassigned away while its broker was down is not owed a LeaderAndIsr", want: Valid, build: func(b *hb.Builder) []int {
			checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			b.Start(2)
			// The controller's LeaderAndIsr to the remaining replicas of
			// t-1 names its replica set without broker 2.
			b.Add(history.Event{Kind: history.KindControlSent, Node: 1, Control: &history.Control{API: history.APILeaderAndIsr,
				ControllerID: 1, ControllerEpoch: 1, TargetBroker: 3, Partitions: []history.ControlPartition{{Topic: "t", Partition: 1, Leader: 3, Replicas: []int32{3, 1}}}}})
			checkpoint(b, 2, nil, cpe(0, 5))
			return nil
		}},
		{name: "high watermark goes back", want: Invalid, explain: "back from 5", build: func(b *hb.Builder) []int {
			a := checkpoint(b, 2, nil, cpe(0, 5))
			b.Start(2)
			c := checkpoint(b, 2, nil, cpe(0, 0))
			return []int{a, c}
		}},
		{name: "stopped replica may go", want: Valid, build: func(b *hb.Builder) []int {
			checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			c := lai(1, 50, history.VerdictAccepted, 0)
			c.API = history.APIStopReplica
			c.Partitions[0].Partition = 1
			b.Control(2, c)
			checkpoint(b, 2, nil, cpe(0, 5))
			return nil
		}},
		{name: "deleted log may go, truncation excuses going back", want: Valid, build: func(b *hb.Builder) []int {
			checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			b.Add(history.Event{Kind: history.KindTruncation, Node: 2, Truncation: &history.Truncation{Topic: "t", Partition: 0, From: 5, To: 2}})
			checkpoint(b, 2, []history.TopicPartition{tp0}, cpe(0, 2))
			return nil
		}},
	})
}

// Each checkpoint write that loses something is one violation naming every
// partition it dropped and every high watermark it moved back, the restart
// before it and the write it is compared with; writes that lose nothing are
// none.
func TestHWCheckpointExplainsEachWrite(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *hb.Builder)
		want  []string // one explanation per violation
		known []string // the example of each known anomaly
	}{
		{"KAFKA-7235: the restarted broker's write leaves out two partitions, and its process is told of only one", func(b *hb.Builder) {
			elected(b, 1, 1, 10)
			checkpoint(b, 2, nil, cpe(0, 0), cpe(1, 0), cpe(3, 0))
			b.Start(2)
			b.Register(2, 200)
			checkpoint(b, 2, nil, cpe(1, 0))
			checkpoint(b, 2, nil, cpe(1, 0), cpe(3, 0))
			b.At(3000).Phase()
		}, []string{
			// t-3 is back at the same high watermark: nothing lost.
			"broker 2's checkpoint write (event 4, +0s) by the process started at event 2 (+0s) left out t-0 (HW 0, written by event 1), which the broker hosted, and that process was never told about it by a LeaderAndIsr before the history ended (+3s), although it registered at event 3 (+0s) and from then controller 1 (epoch 1, elected at event 0, +0s) acted in its reach for 2.997s (no fault on either of them or on ZooKeeper, no write of the controller's waiting for ZooKeeper's answer, the broker registered), longer than the 1s grace (over at +1s): Kafka's controller sends a registered broker a LeaderAndIsr for every replica it hosts (KafkaController.onBrokerStartup), so that high watermark is lost (a process starting from the file starts the partition at its log start).",
		}, nil},
		{"a drop without a restart, then a write moving a high watermark back", func(b *hb.Builder) {
			checkpoint(b, 1, nil, cpe(0, 7), cpe(1, 4))
			checkpoint(b, 1, nil, cpe(0, 7))
			checkpoint(b, 1, nil, cpe(0, 6))
		}, []string{
			"broker 1's checkpoint write (event 1) dropped t-1 (HW 4, written by event 0), which that process held in memory: that high watermark is lost.",
			"broker 1's checkpoint write (event 2) moved t-0's high watermark back from 7 (event 1) to 6: a restart from it starts below the high watermark the broker had written.",
		}, nil},
		{"one write leaves out one partition and moves another back", func(b *hb.Builder) {
			elected(b, 1, 1, 10)
			checkpoint(b, 3, nil, cpe(0, 9), cpe(1, 4))
			b.Start(3)
			b.Start(3)
			b.Register(3, 300)
			checkpoint(b, 3, nil, cpe(1, 2))
			b.At(1500).Phase()
		}, []string{
			"broker 3's checkpoint write (event 5) by the process started at event 3 moved t-1's high watermark back from 4 (event 1) to 2: a restart from it starts below the high watermark the broker had written.",
			"broker 3's checkpoint write (event 5, +10ms) by the process started at event 3 (+0s) left out t-0 (HW 9, written by event 1), which the broker hosted, and that process was never told about it by a LeaderAndIsr before the history ended (+1.5s), although it registered at event 4 (+0s) and from then controller 1 (epoch 1, elected at event 0, +0s) acted in its reach for 1.496s (no fault on either of them or on ZooKeeper, no write of the controller's waiting for ZooKeeper's answer, the broker registered), longer than the 1s grace (over at +1s): Kafka's controller sends a registered broker a LeaderAndIsr for every replica it hosts (KafkaController.onBrokerStartup), so that high watermark is lost (a process starting from the file starts the partition at its log start).",
		}, nil},
		{"clean: every write keeps every hosted partition at or above its high watermark", func(b *hb.Builder) {
			checkpoint(b, 2, nil, cpe(0, 0), cpe(1, 0))
			b.Start(2)
			checkpoint(b, 2, nil, cpe(0, 3), cpe(1, 0))
			checkpoint(b, 2, []history.TopicPartition{tp0}, cpe(0, 3)) // t-1 no longer hosted
		}, nil, nil},
		// Seen in random crash-lose-unflushed runs: the controller's first
		// LeaderAndIsr to the restarted broker had not come when the
		// process, 1.1 s old, crashed again.
		{"a restarted process that crashed before a controller had the time to tell it", func(b *hb.Builder) {
			elected(b, 1, 1, 10)
			checkpoint(b, 3, nil, cpe(0, 0), cpe(1, 5))
			b.At(1000).Start(3)
			b.At(1400).Register(3, 300)
			told(b, 3, 1) // a leader election's LeaderAndIsr, before onBrokerStartup's
			checkpoint(b, 3, nil, cpe(1, 5))
			b.At(1600).Fault(true, "f1", "crash-lose-unflushed", "n3")
			b.At(2100).Start(3)
		}, nil, []string{
			"broker 3's checkpoint write (event 5, +1.4s) by the process started at event 2 (+1s) left out t-0 (HW 0, written by event 1), which the broker hosted, and that process was never told about it by a LeaderAndIsr before the next one started at event 7 (+2.1s), and from its registration at event 3 (+1.4s) until it ended (+1.6s) controller 1 (epoch 1, elected at event 0, +0s) acted in its reach for 200ms, 200ms in all, within the 1s grace: Kafka 2.6.3's ReplicaManager.checkpointHighWatermarks writes only the partitions in allPartitions, which only a LeaderAndIsr fills, so a process the controller had no time to reach writes a file without it, and the next process starts the partition at its log start.",
		}},
		{"a restarted process untold for 13 s while its controller was cut off", func(b *hb.Builder) {
			elected(b, 1, 1, 10)
			checkpoint(b, 2, nil, cpe(0, 0), cpe(1, 5))
			b.At(1000).Start(2)
			b.At(1200).Fault(true, "f1", "pause", "n1")
			b.At(1300).Register(2, 200)
			told(b, 2, 1)
			checkpoint(b, 2, nil, cpe(1, 5))
			b.At(14000).Start(2)
		}, nil, []string{
			"broker 2's checkpoint write (event 6, +1.3s) by the process started at event 2 (+1s) left out t-0 (HW 0, written by event 1), which the broker hosted, and that process was never told about it by a LeaderAndIsr before the next one started at event 7 (+14s), and from its registration at event 4 (+1.3s) until it ended (+14s) no controller acted in its reach (each was cut off by a fault on it, on the broker or on ZooKeeper, waiting for ZooKeeper's answer, or none acted): Kafka 2.6.3's ReplicaManager.checkpointHighWatermarks writes only the partitions in allPartitions, which only a LeaderAndIsr fills, so a process the controller had no time to reach writes a file without it, and the next process starts the partition at its log start.",
		}},
		{"a restarted process untold for 13 s under an acting controller", func(b *hb.Builder) {
			elected(b, 1, 1, 10)
			checkpoint(b, 2, nil, cpe(0, 0), cpe(1, 5))
			b.At(1000).Start(2)
			b.At(1300).Register(2, 200)
			told(b, 2, 1)
			checkpoint(b, 2, nil, cpe(1, 5))
			b.At(14000).Start(2)
		}, []string{
			"broker 2's checkpoint write (event 5, +1.3s) by the process started at event 2 (+1s) left out t-0 (HW 0, written by event 1), which the broker hosted, and that process was never told about it by a LeaderAndIsr before the next one started at event 6 (+14s), although it registered at event 3 (+1.3s) and from then controller 1 (epoch 1, elected at event 0, +0s) acted in its reach for 12.7s (no fault on either of them or on ZooKeeper, no write of the controller's waiting for ZooKeeper's answer, the broker registered), longer than the 1s grace (over at +2.3s): Kafka's controller sends a registered broker a LeaderAndIsr for every replica it hosts (KafkaController.onBrokerStartup), so that high watermark is lost (a process starting from the file starts the partition at its log start).",
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := hb.New()
			tt.build(b)
			r := HWCheckpoint{}.Check(b.History())
			var got []string
			for _, v := range r.Violations {
				got = append(got, v.Explanation)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			var known []string
			for _, k := range r.Known {
				known = append(known, k.Example)
			}
			if !slices.Equal(known, tt.known) {
				t.Fatalf("known anomalies:\n%s\nwant:\n%s", strings.Join(known, "\n"), strings.Join(tt.known, "\n"))
			}
			if want := Valid; len(tt.want) > 0 {
				if r.Verdict != Invalid {
					t.Fatalf("verdict %s with violations", r.Verdict)
				}
			} else if r.Verdict != want {
				t.Fatalf("verdict %s, want %s: %s", r.Verdict, want, r.Explanation)
			}
		})
	}
}

func TestAvailability(t *testing.T) {
	c := Availability{Grace: testConfig().OfflineGrace} // 100 ms
	runCases(t, c, []tcase{
		{name: "leader back soon after heal", want: Valid, build: func(b *hb.Builder) []int {
			b.State(tp0, 1, 1, 1, 1, 1, 2)
			b.Fault(true, "f1", "kill", "n1")
			b.State(tp0, -1, 1, 1, 2, 2)
			b.At(50).Fault(false, "f1", "kill", "n1")
			b.At(80).State(tp0, 2, 2, 1, 3, 2)
			b.At(1000).Phase()
			return nil
		}},
		{name: "still offline after grace", want: Invalid, explain: "still offline", build: func(b *hb.Builder) []int {
			b.State(tp0, 1, 1, 1, 1, 1, 2)
			b.Fault(true, "f1", "kill", "n1")
			off := b.State(tp0, -1, 1, 1, 2, 1)
			stop := b.At(50).Fault(false, "f1", "kill", "n1")
			b.At(1000).Phase()
			return []int{off, stop}
		}},
		{name: "recovered, but too late", want: Invalid, explain: "until event", build: func(b *hb.Builder) []int {
			b.Fault(true, "f1", "kill", "n1")
			off := b.State(tp0, -1, 1, 1, 2, 1)
			b.At(50).Fault(false, "f1", "kill", "n1")
			on := b.At(500).State(tp0, 2, 2, 1, 3, 2)
			return []int{off, on}
		}},
		{name: "history ends inside the grace", want: Unknown, explain: "history ends before", build: func(b *hb.Builder) []int {
			b.Fault(true, "f1", "kill", "n1")
			b.State(tp0, -1, 1, 1, 2, 1)
			b.At(50).Fault(false, "f1", "kill", "n1")
			return nil
		}},
		{name: "fault never healed", want: Unknown, explain: "never stopped", build: func(b *hb.Builder) []int {
			b.Fault(true, "f1", "kill", "n1")
			b.State(tp0, -1, 1, 1, 2, 1)
			b.At(1000).Phase()
			return nil
		}},
		// ZooKeeper's order is the zxid: a paused controller's old state
		// logged late does not take the partition offline.
		{name: "paused controller logs an old state late", want: Valid, build: func(b *hb.Builder) []int {
			b.State(tp0, 2, 5, 2, 20, 2, 3)
			b.Fault(true, "f1", "pause-controller", "n1")
			b.At(50).Fault(false, "f1", "pause-controller", "n1")
			lateState(b, 1, -1, 4, 15)
			b.At(1000).Phase()
			return nil
		}},
		{name: "leader named in ZooKeeper never took the role", want: Invalid, explain: "no process of broker 2 took that role", build: func(b *hb.Builder) []int {
			role(b, 1, 1, history.RoleLeader)
			b.State(tp0, 1, 1, 1, 1, 1, 2)
			b.Fault(true, "f1", "kill", "n1")
			named := b.State(tp0, 2, 2, 1, 2, 2)
			stop := b.At(50).Fault(false, "f1", "kill", "n1")
			b.At(1000).Phase()
			return []int{named, stop}
		}},
		{name: "leader named in ZooKeeper took the role", want: Valid, build: func(b *hb.Builder) []int {
			role(b, 1, 1, history.RoleLeader)
			b.State(tp0, 1, 1, 1, 1, 1, 2)
			b.Fault(true, "f1", "kill", "n1")
			b.State(tp0, 2, 2, 1, 2, 2)
			role(b, 2, 2, history.RoleLeader)
			b.At(50).Fault(false, "f1", "kill", "n1")
			b.At(1000).Phase()
			return nil
		}},
		{name: "restarted leader never took the role again", want: Invalid, explain: "no process of broker 1 took that role", build: func(b *hb.Builder) []int {
			b.State(tp0, 1, 1, 1, 1, 1, 2)
			role(b, 1, 1, history.RoleLeader)
			b.Fault(true, "f1", "bounce", "n1")
			b.Start(1)
			b.At(50).Fault(false, "f1", "bounce", "n1")
			b.At(1000).Phase()
			return nil
		}},
	})
}

// lateState appends a controller's successful partition-state write with
// zxid, logged now (as a controller paused after writing logs it).
func lateState(b *hb.Builder, node, leader, epoch int32, zxid int64, isr ...int32) int {
	return b.Add(history.Event{Kind: history.KindZKWrite, Node: node, ZKWrite: &history.ZKWrite{Path: "/brokers/topics/t/partitions/0/state",
		Op: "set", ControllerEpoch: 1, Outcome: history.ZKOK, Zxid: zxid,
		State: &history.PartitionState{Topic: "t", Partition: 0, Leader: leader, LeaderEpoch: epoch, ControllerEpoch: 1, ISR: isr}}})
}

func TestLiveness(t *testing.T) {
	c := Liveness{Grace: testConfig().LivenessGrace, MaxBadVersionRetries: 3}
	runCases(t, c, []tcase{
		{name: "offline with no live ISR member is not the controller's fault", want: Valid, build: func(b *hb.Builder) []int {
			b.Brokers(1, 2, 3)
			b.Fault(true, "f1", "kill", "n1")
			b.Brokers(2, 3)
			b.State(tp0, -1, 2, 1, 5, 1)
			b.At(50).Fault(false, "f1", "kill", "n1")
			b.At(1000).Phase()
			return nil
		}},
		{name: "leader -1 with a live ISR member", want: Invalid, explain: "did not finish electing", build: func(b *hb.Builder) []int {
			b.Brokers(1, 2, 3)
			b.Fault(true, "f1", "pause", "zk2")
			s := b.State(tp0, -1, 2, 1, 5, 2, 3)
			b.At(50).Fault(false, "f1", "pause", "zk2")
			b.At(1000).Phase()
			return []int{s}
		}},
		{name: "endless BADVERSION retry", want: Invalid, explain: "stuck retrying", build: func(b *hb.Builder) []int {
			return badVersionsAfterHeal(b, 4)
		}},
		// The admin workload's controlled shutdown (or an operator)
		// restarts the stuck controller long after the grace: the
		// restart ends the retrying, not the finding.
		{name: "stuck past the grace, then restarted", want: Invalid, explain: "until it stopped being controller", build: func(b *hb.Builder) []int {
			evs := badVersionsAfterHeal(b, 4)
			b.At(900).Start(2)
			b.At(2000).Phase()
			return evs
		}},
		{name: "a few BADVERSIONs, then restarted", want: Valid, build: func(b *hb.Builder) []int {
			badVersionsAfterHeal(b, 2)
			b.At(900).Start(2)
			b.At(2000).Phase()
			return nil
		}},
		{name: "BADVERSION during the fault, then progress", want: Valid, build: func(b *hb.Builder) []int {
			b.Fault(true, "f1", "slow-link", "zk1", "zk3")
			for i := 0; i < 10; i++ {
				zkWrite(b, 2, 3, 0, 0, history.ZKBadVersion)
			}
			b.At(50).Fault(false, "f1", "slow-link", "zk1", "zk3")
			zkWrite(b, 2, 3, 0, 0, history.ZKOK)
			b.At(1000).Phase()
			return nil
		}},
		{name: "never healed", want: Unknown, explain: "never stopped", build: func(b *hb.Builder) []int {
			b.Fault(true, "f1", "kill", "n1")
			return nil
		}},
		{name: "BADVERSION each resolved by a re-read", want: Valid, build: func(b *hb.Builder) []int {
			b.Fault(true, "f1", "slow-link", "zk1", "zk3")
			b.At(50).Fault(false, "f1", "slow-link", "zk1", "zk3")
			b.At(200)
			for i := 0; i < 5; i++ {
				zkWrite(b, 2, 3, 0, 0, history.ZKBadVersion)
				zkWrite(b, 2, 3, int64(30+i), 0, history.ZKOK)
			}
			b.At(1000).Phase()
			return nil
		}},
		{name: "history ends inside the grace with a write still failing", want: Unknown, explain: "history ends before", build: func(b *hb.Builder) []int {
			b.Fault(true, "f1", "slow-link", "zk1", "zk3")
			b.At(50).Fault(false, "f1", "slow-link", "zk1", "zk3")
			for i := 0; i < 10; i++ {
				zkWrite(b, 2, 3, 0, 0, history.ZKBadVersion)
			}
			return nil
		}},
		{name: "paused controller logs an old state late", want: Valid, build: func(b *hb.Builder) []int {
			b.Brokers(1, 2, 3)
			b.State(tp0, 2, 5, 2, 20, 2, 3)
			b.Fault(true, "f1", "pause-controller", "n1")
			b.At(50).Fault(false, "f1", "pause-controller", "n1")
			lateState(b, 1, -1, 4, 15, 2, 3)
			b.At(1000).Phase()
			return nil
		}},
	})
}

func TestLinearizable(t *testing.T) {
	runCases(t, Linearizable{Timeout: testConfig().LinearizeTimeout}, []tcase{
		{name: "reads follow produces", want: Valid, build: func(b *hb.Builder) []int {
			b.Produce(1, tp0, "a")
			b.Produce(2, tp0, "b") // unknown, concurrent
			b.Complete(1, history.OpOK, tp0, history.FProduce, 0)
			b.Complete(2, history.OpInfo, tp0, history.FProduce, 0)
			b.ReadBack(3, tp0, 0, false, hb.Rec(0, "a"), hb.Rec(1, "b"))
			return nil
		}},
		{name: "read of a value never produced", want: Invalid, explain: "no produce wrote", build: func(b *hb.Builder) []int {
			produceOK(b, 1, "a", 0)
			r := b.ReadBack(3, tp0, 0, false, hb.Rec(0, "zz"))
			return []int{r}
		}},
		{name: "acknowledged offsets out of real-time order", want: Invalid, explain: "cannot be placed", build: func(b *hb.Builder) []int {
			i, _ := produceOK(b, 1, "a", 1) // offset 1 acknowledged before offset 0's produce began
			produceOK(b, 2, "b", 0)
			return []int{i}
		}},
		{name: "stale empty read after an acknowledged produce", want: Invalid, explain: "no leader change explains", build: func(b *hb.Builder) []int {
			produceOK(b, 1, "a", 0)
			b.ReadBack(3, tp0, 0, false)
			return nil
		}},
	})
}

func TestHealTreatsNodeRestartAsEndOfItsFailpoints(t *testing.T) {
	b := hb.New()
	b.Add(history.Event{Kind: history.KindFaultStart, Node: 1, Source: "n1", Fault: &history.Fault{ID: "fp1", Name: "failpoint", Failpoint: "controller-after-zk-write"}})
	b.Add(history.Event{Kind: history.KindFaultStart, Fault: &history.Fault{ID: "fp1", Name: "kill", Targets: []string{"n1"}}}) // same ID, other source
	if hi := heal(b.History()); hi.healed {
		t.Fatal("open faults reported healed")
	}
	b.Add(history.Event{Kind: history.KindFaultStop, Fault: &history.Fault{ID: "fp1", Name: "kill"}})
	if hi := heal(b.History()); hi.healed {
		t.Fatal("the node's failpoint is still open")
	}
	restart := b.Start(1)
	hi := heal(b.History())
	if !hi.healed || hi.at != b.History().Events[restart].Time {
		t.Fatalf("restart did not end the failpoint: %+v", hi)
	}
}

// Porcupine running out of time is unknown, never valid.
func TestLinearizableTimeoutIsUnknown(t *testing.T) {
	h := hb.Clean(hb.GenConfig{Partitions: 2, Processes: 5, Ops: 500, ReadRate: 0.3, Seed: 2})
	r := Linearizable{Timeout: time.Nanosecond}.Check(h)
	if r.Verdict != Unknown || !strings.Contains(r.Explanation, "ran out") {
		t.Fatalf("got %s: %s", r.Verdict, r.Explanation)
	}
}

func TestHealPhaseEndClosesOpenFaults(t *testing.T) {
	b := hb.New()
	b.Fault(true, "f1", "kill", "n2")
	if heal(b.History()).healed {
		t.Fatal("open fault reported healed")
	}
	end := b.Add(history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseHeal, Mark: history.PhaseEnd}})
	hi := heal(b.History())
	if !hi.healed || hi.at != b.History().Events[end].Time {
		t.Fatalf("heal phase end did not heal: %+v", hi)
	}
}

// heal's summary of the fault windows, for each way a fault ends.
func TestHealInfo(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *hb.Builder) (at, lastStop, openIdx int) // event indices, -1 for none
		want  healInfo                                        // healed and faults; at, lastStop, openIdx from build
	}{
		{"no faults", func(b *hb.Builder) (int, int, int) {
			b.Start(1)
			b.Start(2)
			return 0, -1, -1
		}, healInfo{healed: true}},
		{"started and stopped", func(b *hb.Builder) (int, int, int) {
			b.Fault(true, "f1", "kill", "n1")
			s := b.Fault(false, "f1", "kill")
			b.Start(2)
			return s, s, -1
		}, healInfo{healed: true, faults: 1}},
		{"one never stopped", func(b *hb.Builder) (int, int, int) {
			b.Fault(true, "f1", "kill", "n1")
			o := b.Fault(true, "f2", "pause", "n2")
			s := b.Fault(false, "f1", "kill")
			return s, s, o
		}, healInfo{faults: 2}},
		{"a second start does not heal the first", func(b *hb.Builder) (int, int, int) {
			b.Fault(true, "f1", "kill", "n1")
			b.Fault(true, "f1", "kill", "n1")
			s := b.Fault(false, "f1", "kill")
			return s, s, -1
		}, healInfo{healed: true, faults: 2}},
		{"a stop with no start still counts as the last stop", func(b *hb.Builder) (int, int, int) {
			b.Fault(true, "f1", "kill", "n1")
			b.Fault(false, "f1", "kill")
			s := b.Fault(false, "f9", "kill")
			return s, s, -1
		}, healInfo{healed: true, faults: 1}},
		// A node reports leaving every failpoint: a hold it never left,
		// in a process that ran on to the end, outlasted the heal (the
		// nemesis had not known it was armed).
		{"a node's failpoint hold outlasting the heal", func(b *hb.Builder) (int, int, int) {
			o := fpHold(b, 3, "fp-n3-1")
			healEnd(b)
			b.Start(1)
			return 0, -1, o
		}, healInfo{faults: 1}},
		{"a node's failpoint hold it left after the heal", func(b *hb.Builder) (int, int, int) {
			fpHold(b, 3, "fp-n3-1")
			healEnd(b)
			s := b.Add(history.Event{Kind: history.KindFaultStop, Node: 3, Fault: &history.Fault{ID: "fp-n3-1", Name: "failpoint", Failpoint: "controller-before-broker-change"}})
			return s, s, -1
		}, healInfo{healed: true, faults: 1}},
		{"a node's failpoint hold whose process restarted after the heal", func(b *hb.Builder) (int, int, int) {
			fpHold(b, 3, "fp-n3-1")
			e := healEnd(b)
			b.Start(3)
			return e, -1, -1
		}, healInfo{healed: true, faults: 1}},
		{"a nemesis fault the heal ended", func(b *hb.Builder) (int, int, int) {
			b.Add(history.Event{Kind: history.KindFaultStart, Fault: &history.Fault{ID: "f1", Name: "failpoint", Failpoint: "controller-before-broker-change", Targets: []string{"n3"}}})
			e := healEnd(b)
			b.Start(1)
			return e, -1, -1
		}, healInfo{healed: true, faults: 1}},
		// Two ZooKeeper servers left stopped by a heal that raced its
		// stall: the ensemble serves no session from before the heal's
		// end to the end of the history, a fault in force.
		{"ZooKeeper without a session from before the heal's end", func(b *hb.Builder) (int, int, int) {
			zkSession(b, "StateHasSession")
			b.Fault(true, "f1", "stall-zk-session-server", "zk3", "n1")
			s := b.Fault(false, "f1", "stall-zk-session-server")
			o := zkSession(b, "StateDisconnected")
			zkSession(b, "StateConnecting")
			zkSession(b, "StateConnected")
			healEnd(b)
			b.Start(1)
			return s, s, o
		}, healInfo{faults: 1}},
		{"ZooKeeper serving a session again before the end", func(b *hb.Builder) (int, int, int) {
			zkSession(b, "StateHasSession")
			b.Fault(true, "f1", "isolate-zk-leader", "zk2")
			s := b.Fault(false, "f1", "isolate-zk-leader")
			zkSession(b, "StateDisconnected")
			healEnd(b)
			zkSession(b, "StateHasSession")
			return s, s, -1
		}, healInfo{healed: true, faults: 1}},
		// The engine may carry out a kill whose request failed (cut off by
		// the end of the workload): a broker whose process, alive after
		// the kill was sent, ended without a node_stop and was not
		// running at the end was left down by a fault nothing healed.
		{"a failed kill of a broker left down", func(b *hb.Builder) (int, int, int) {
			b.Start(1)
			k := b.Fault(true, "f1", "kill", "n1")
			b.Start(1) // a racing heal's start
			s := failedStop(b, "f1", "kill")
			running(b, 2, 3)
			return s, s, k
		}, healInfo{faults: 1}},
		{"a failed kill of a broker running at the end", func(b *hb.Builder) (int, int, int) {
			b.Start(1)
			b.Fault(true, "f1", "kill", "n1")
			b.Start(1)
			s := failedStop(b, "f1", "kill")
			running(b, 1, 2, 3)
			return s, s, -1
		}, healInfo{healed: true, faults: 1}},
		{"a failed kill of a broker whose process stopped cleanly", func(b *hb.Builder) (int, int, int) {
			b.Fault(true, "f1", "kill", "n1")
			b.Start(1)
			b.Add(history.Event{Kind: history.KindNodeStop, Node: 1})
			s := failedStop(b, "f1", "kill")
			running(b, 2, 3)
			return s, s, -1
		}, healInfo{healed: true, faults: 1}},
		{"a failed kill of a broker gone before it was sent", func(b *hb.Builder) (int, int, int) {
			b.Start(1)
			b.Fault(true, "f1", "kill", "n1")
			s := failedStop(b, "f1", "kill")
			running(b, 2, 3)
			return s, s, -1
		}, healInfo{healed: true, faults: 1}},
		{"the watcher's session lost only after the heal's end", func(b *hb.Builder) (int, int, int) {
			zkSession(b, "StateHasSession")
			b.Fault(true, "f1", "kill", "n1")
			s := b.Fault(false, "f1", "kill")
			healEnd(b)
			zkSession(b, "StateDisconnected")
			return s, s, -1
		}, healInfo{healed: true, faults: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := hb.New()
			at, lastStop, openIdx := tt.build(b)
			h := b.History()
			want := tt.want
			want.at, want.end, want.lastStop, want.openIdx = h.Events[at].Time, h.Events[len(h.Events)-1].Time, lastStop, openIdx
			got := heal(h)
			if (got.inForce != "") != !got.healed {
				t.Errorf("healed %v, in force %q", got.healed, got.inForce)
			}
			got.inForce = ""
			if got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

// failedStop appends the fault_stop of a kill whose engine request failed.
func failedStop(b *hb.Builder, id, name string) int {
	return b.Add(history.Event{Kind: history.KindFaultStop, Fault: &history.Fault{ID: id, Name: name,
		Error: `signal SIGKILL to zkchaos-n1: Post "http://%2Fvar%2Frun%2Fdocker.sock/v1.41/containers/6e2330c2/kill?signal=SIGKILL": context deadline exceeded`}})
}

// fpHold appends node's report that it holds in a failpoint.
func fpHold(b *hb.Builder, node int32, id string) int {
	return b.Add(history.Event{Kind: history.KindFaultStart, Node: node, Fault: &history.Fault{ID: id, Name: "failpoint", Failpoint: "controller-before-broker-change",
		Targets: []string{"n" + strconv.Itoa(int(node))}, Detail: "controller-before-broker-change 1*pause holding until released over HTTP or disarmed"}})
}

// zkSession appends a session state the harness's ZooKeeper watcher saw.
func zkSession(b *hb.Builder, state string) int {
	return b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/", Type: "state", SessionState: state}})
}

// healEnd appends the end of the harness's heal phase.
func healEnd(b *hb.Builder) int {
	return b.Add(history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseHeal, Mark: history.PhaseEnd}})
}

// Partitions are reported in partition order: t-2 before t-10 (ordering by
// the name "t-10" < "t-2" put them the other way round).
func TestDurabilityReportsPartitionsInOrder(t *testing.T) {
	b := hb.New()
	for _, p := range []int32{10, 2} {
		tp := history.TP("t", p)
		b.ProduceOK(1, tp, "a", 0)
		b.ReadBack(99, tp, 0, true)
	}
	r := Durability{}.Check(b.History())
	if r.Verdict != Invalid || len(r.Violations) != 2 {
		t.Fatalf("got %s with %d violations: %s", r.Verdict, len(r.Violations), r.Explanation)
	}
	if !strings.Contains(r.Violations[0].Explanation, "t-2") || !strings.Contains(r.Violations[1].Explanation, "t-10") {
		t.Fatalf("violations out of partition order: %q, %q", r.Violations[0].Explanation, r.Violations[1].Explanation)
	}
}

// A violation that an absence proves (no leader, no progress within a
// grace) holds from when the grace ran out, which is neither of the events
// it cites: chaos power's time to first violation reads At. One an event
// proves leaves At unset.
func TestViolationAt(t *testing.T) {
	cfg := testConfig()
	live := Liveness{Grace: cfg.LivenessGrace, MaxBadVersionRetries: 3}
	avail := Availability{Grace: cfg.OfflineGrace}
	ms := func(n int64) int64 { return hb.T0 + n*hb.Ms }
	for _, tt := range []struct {
		name  string
		c     Checker
		build func(b *hb.Builder)
		want  int64
	}{
		// Healed at +50 ms, grace 100 ms: the 4th failure past +150 ms
		// (MaxBadVersionRetries 3) is at +203 ms.
		{"stuck retrying", live, func(b *hb.Builder) { badVersionsAfterHeal(b, 6) }, ms(203)},
		{"still offline after the grace", avail, func(b *hb.Builder) {
			b.State(tp0, 1, 1, 1, 1, 1, 2)
			b.Fault(true, "f1", "kill", "n1")
			b.State(tp0, -1, 1, 1, 2, 1)
			b.At(50).Fault(false, "f1", "kill", "n1")
			b.At(1000).Phase()
		}, ms(150)},
		{"back, but after the grace", avail, func(b *hb.Builder) {
			b.Fault(true, "f1", "kill", "n1")
			b.State(tp0, -1, 1, 1, 2, 1)
			b.At(50).Fault(false, "f1", "kill", "n1")
			b.At(500).State(tp0, 2, 2, 1, 3, 2)
		}, ms(150)},
		// The controller's leader -1 write at +100 ms, ElectGrace 300 ms.
		{"electable broker left offline", Availability{Grace: time.Second, ElectGrace: 300 * time.Millisecond, Strict: true},
			func(b *hb.Builder) { kafka3861(b, 900, nil) }, ms(400)},
		{"a stale request obeyed", ControllerFencing{}, func(b *hb.Builder) {
			b.Control(3, lai(3, 50, history.VerdictAccepted, 0))
			b.Control(2, lai(4, 50, history.VerdictAccepted, 3))
			b.Control(2, lai(3, 50, history.VerdictAccepted, 4))
		}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := hb.New()
			tt.build(b)
			r := tt.c.Check(b.History())
			if r.Verdict != Invalid || len(r.Violations) == 0 {
				t.Fatalf("verdict %s: %s", r.Verdict, r.Explanation)
			}
			if got := r.Violations[0].At; got != tt.want {
				t.Fatalf("At %+d ms from T0, want %+d ms (%s)", (got-hb.T0)/hb.Ms, (tt.want-hb.T0)/hb.Ms, r.Explanation)
			}
		})
	}
}
