package checkers

import (
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

const statePath = "/brokers/topics/t/partitions/0/state"

// stateWrite appends node's partition-state write of t-0 (leader, epoch)
// with its outcome and zxid, as the controller and a leader's ISR change
// log it.
func stateWrite(b *hb.Builder, node, leader, epoch int32, zxid int64, outcome string) int {
	return b.Add(history.Event{Kind: history.KindZKWrite, Node: node, ZKWrite: &history.ZKWrite{Path: statePath, Op: "set",
		Outcome: outcome, Zxid: zxid, State: &history.PartitionState{Topic: "t", Partition: 0, Leader: leader, LeaderEpoch: epoch, ISR: []int32{leader}}}})
}

// The state znode's leader epoch never goes back in ZooKeeper order.
func TestLeaderUniquenessStateEpochs(t *testing.T) {
	runCases(t, LeaderUniqueness{}, []tcase{
		{name: "deposed leader's unconditional ISR write overwrites the controller's", want: Invalid,
			explain: "t-0's state went back in ZooKeeper from leader 2 at leader epoch 5 (written by broker 1, zxid 20",
			build: func(b *hb.Builder) []int {
				b.State(tp0, 3, 4, 1, 10, 3, 2)
				c := stateWrite(b, 1, 2, 5, 20, history.ZKOK)
				b.State(tp0, 2, 5, 1, 20, 2)
				l := stateWrite(b, 3, 3, 4, 30, history.ZKOK)
				b.State(tp0, 3, 4, 1, 30, 3)
				return []int{c, l}
			}},
		{name: "the watcher alone sees the regression", want: Invalid, explain: "to leader 3 at leader epoch 4 (seen by the ZooKeeper watcher, zxid 30",
			build: func(b *hb.Builder) []int {
				s := b.State(tp0, 2, 5, 1, 20, 2)
				o := b.State(tp0, 3, 4, 1, 30, 3)
				return []int{s, o}
			}},
		{name: "watcher observations without mzxid, in session order", want: Invalid, explain: "at leader epoch 4 (seen by the ZooKeeper watcher, event",
			build: func(b *hb.Builder) []int {
				s := b.State(tp0, 2, 5, 1, 0, 2)
				o := b.State(tp0, 3, 4, 1, 0, 3)
				return []int{s, o}
			}},
		{name: "a second regression after the controller rewrote the state", want: Invalid, explain: "(and 1 more violations)",
			build: func(b *hb.Builder) []int {
				stateWrite(b, 1, 2, 5, 20, history.ZKOK)
				stateWrite(b, 3, 3, 4, 30, history.ZKOK)
				c := stateWrite(b, 1, 2, 6, 40, history.ZKOK)
				l := stateWrite(b, 3, 3, 4, 50, history.ZKOK)
				return []int{c, l}
			}},
		{name: "a re-created topic's epochs start again, its version 0 unseen", want: Valid, build: func(b *hb.Builder) []int {
			for _, w := range []struct {
				epoch   int32
				version int32
				zxid    int64
			}{{6, 6, 20}, {6, 7, 25}, {1, 1, 40}, {1, 2, 45}} {
				b.Add(history.Event{Kind: history.KindZKWrite, Node: 1, ZKWrite: &history.ZKWrite{Path: statePath, Op: "set", Outcome: history.ZKOK,
					Zxid: w.zxid, NewVersion: w.version, State: &history.PartitionState{Topic: "t", Partition: 0, Leader: -1, LeaderEpoch: w.epoch}}})
			}
			return nil
		}},
		{name: "epochs rise with ISR changes between", want: Valid, build: func(b *hb.Builder) []int {
			stateWrite(b, 1, 2, 5, 20, history.ZKOK)
			b.State(tp0, 2, 5, 1, 20, 2)
			stateWrite(b, 2, 2, 5, 25, history.ZKOK) // the leader's ISR change keeps its epoch
			stateWrite(b, 1, 3, 6, 30, history.ZKOK)
			b.State(tp0, 3, 6, 1, 30, 3)
			return nil
		}},
		{name: "an older write logged late keeps its zxid order", want: Valid, build: func(b *hb.Builder) []int {
			stateWrite(b, 1, 2, 5, 20, history.ZKOK)
			b.State(tp0, 2, 5, 1, 20, 2)
			stateWrite(b, 3, 3, 4, 15, history.ZKOK) // paused between its write and its log line
			return nil
		}},
		{name: "a node's write without zxid is not ordered by its log time", want: Valid, build: func(b *hb.Builder) []int {
			stateWrite(b, 1, 2, 5, 20, history.ZKOK)
			stateWrite(b, 3, 3, 4, 0, history.ZKOK)
			return nil
		}},
		{name: "a refused stale write changes nothing", want: Valid, build: func(b *hb.Builder) []int {
			stateWrite(b, 1, 2, 5, 20, history.ZKOK)
			stateWrite(b, 3, 3, 4, 0, history.ZKBadVersion)
			b.State(tp0, 2, 5, 1, 20, 2)
			return nil
		}},
		{name: "partitions are ordered apart", want: Valid, build: func(b *hb.Builder) []int {
			stateWrite(b, 1, 2, 5, 20, history.ZKOK)
			b.State(history.TP("t", 1), 3, 1, 1, 30, 3)
			return nil
		}},
	})
}

// One stale writer's run of versions at its old epoch is one regression.
func TestLeaderUniquenessStateRegressionReportedOnce(t *testing.T) {
	b := hb.New()
	stateWrite(b, 1, 2, 5, 20, history.ZKOK)
	stateWrite(b, 3, 3, 4, 30, history.ZKOK)
	b.State(tp0, 3, 4, 1, 30, 3)
	stateWrite(b, 3, 3, 4, 40, history.ZKOK) // its next ISR change, still at epoch 4
	r := LeaderUniqueness{}.Check(b.History())
	if r.Verdict != Invalid || len(r.Violations) != 1 {
		t.Fatalf("%s with %d violations, want one: %s", r.Verdict, len(r.Violations), r.Explanation)
	}
}

// controllerAt appends the watcher's view of /controller naming id with
// czxid.
func controllerAt(b *hb.Builder, id int32, czxid int64) int {
	return b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/controller", Type: history.WatchChanged,
		Czxid: czxid, Mzxid: czxid, ControllerID: &id}})
}

func controllerGone(b *hb.Builder) int {
	return b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/controller", Type: history.WatchDeleted}})
}

func resigned(b *hb.Builder, node, epoch int32) int {
	return b.Add(history.Event{Kind: history.KindControllerResigned, Node: node, Controller: &history.ControllerRun{Epoch: epoch, EpochZkVersion: epoch}})
}

func stopped(b *hb.Builder, node int32) int {
	return b.Add(history.Event{Kind: history.KindNodeStop, Node: node, Process: &history.Process{Incarnation: 1}})
}

// electedController: broker 2 elected at epoch 3, its /controller znode
// (czxid 50) seen by the watcher; returns the watcher's event.
func electedController(b *hb.Builder) int {
	b.Brokers(1, 2, 3)
	elected(b, 2, 3, 50)
	return controllerAt(b, 2, 50)
}

// A controller that resigns while /controller still names it leaves the
// cluster without one; resignations that end the znode, follow a newer
// election or belong to a stopping process do not.
func TestLivenessResignWhileNamed(t *testing.T) {
	c := Liveness{Grace: testConfig().LivenessGrace, MaxBadVersionRetries: 3, ResignGrace: time.Second}
	runCases(t, c, []tcase{
		{name: "live controller resigns and keeps the znode to the end", want: Invalid,
			explain: "controller 2 (epoch 3) resigned at event", build: func(b *hb.Builder) []int {
				w := electedController(b)
				r := b.At(100).Add(history.Event{Kind: history.KindControllerResigned, Node: 2, Controller: &history.ControllerRun{Epoch: 3}})
				b.At(5000).Phase()
				return []int{r, w}
			}},
		{name: "no controller until the broker is killed and restarts", want: Invalid,
			explain: "kept naming it for 9.1s, until broker 2 restarted (event", build: func(b *hb.Builder) []int {
				w := electedController(b)
				r := resigned(b.At(900), 2, 3)
				s := b.At(10000).Start(2)
				controllerGone(b.At(16000))
				elected(b, 1, 4, 90)
				return []int{r, w, s}
			}},
		{name: "no controller until its session expired", want: Invalid,
			explain: "until the watcher saw /controller deleted", build: func(b *hb.Builder) []int {
				w := electedController(b)
				r := resigned(b.At(100), 2, 3)
				g := controllerGone(b.At(4000))
				elected(b, 1, 4, 90)
				return []int{r, w, g}
			}},
		{name: "resigned during its failover, before the watcher saw its znode", want: Invalid,
			explain: "while /controller still named it (watcher event", build: func(b *hb.Builder) []int {
				b.Brokers(1, 2, 3)
				controllerAt(b, 1, 40)
				controllerGone(b.At(10))
				elected(b.At(20), 2, 3, 50)
				r := resigned(b.At(30), 2, 3)
				w := controllerAt(b.At(40), 2, 50)
				b.At(5000).Phase()
				return []int{r, w}
			}},
		{name: "the znode the watcher sees later is not the one of the resigned term", want: Valid, build: func(b *hb.Builder) []int {
			b.Brokers(1, 2, 3)
			controllerGone(b.At(10))
			elected(b.At(20), 2, 3, 50)
			resigned(b.At(30), 2, 3)
			controllerAt(b.At(40), 2, 70)
			b.At(5000).Phase()
			return nil
		}},
		{name: "judged while faults are still open", want: Invalid, explain: "the cluster had no acting controller", build: func(b *hb.Builder) []int {
			w := electedController(b)
			b.Fault(true, "f1", "partition", "n1")
			r := resigned(b.At(100), 2, 3)
			b.At(5000).Phase()
			return []int{r, w}
		}},
		{name: "resigned after /controller named another broker", want: Valid, build: func(b *hb.Builder) []int {
			electedController(b)
			controllerGone(b.At(50))
			controllerAt(b, 1, 80)
			resigned(b.At(100), 2, 3)
			b.At(5000).Phase()
			return nil
		}},
		{name: "the watcher sees the znode go within the grace", want: Valid, build: func(b *hb.Builder) []int {
			electedController(b)
			resigned(b.At(100), 2, 3)
			controllerGone(b.At(130))
			b.At(5000).Phase()
			return nil
		}},
		{name: "a newer controller elected before the resignation, the watcher lagging", want: Valid, build: func(b *hb.Builder) []int {
			electedController(b)
			elected(b.At(50), 1, 4, 80)
			resigned(b.At(100), 2, 3)
			b.At(5000).Phase()
			return nil
		}},
		{name: "session expired: the broker registered again, the watcher lagging", want: Valid, build: func(b *hb.Builder) []int {
			electedController(b)
			b.At(90).Register(2, 120)
			resigned(b, 2, 3)
			b.At(5000).Phase()
			return nil
		}},
		{name: "shutdown: node_stop logged just before the resignation", want: Valid, build: func(b *hb.Builder) []int {
			electedController(b)
			stopped(b.At(100), 2)
			resigned(b, 2, 3)
			b.At(5000).Phase()
			return nil
		}},
		{name: "shutdown: node_stop right after the resignation", want: Valid, build: func(b *hb.Builder) []int {
			electedController(b)
			resigned(b.At(100), 2, 3)
			stopped(b, 2)
			b.At(5000).Phase()
			return nil
		}},
		{name: "re-elected itself with a new znode within the grace", want: Valid, build: func(b *hb.Builder) []int {
			electedController(b)
			resigned(b.At(100), 2, 3)
			elected(b.At(200), 2, 4, 90)
			controllerAt(b, 2, 90)
			b.At(5000).Phase()
			return nil
		}},
		{name: "no /controller observations: nothing to judge", want: Valid, build: func(b *hb.Builder) []int {
			b.Brokers(1, 2, 3)
			elected(b, 2, 3, 50)
			resigned(b.At(100), 2, 3)
			b.At(5000).Phase()
			return nil
		}},
	})
}

// A violation holds from the resignation plus the grace, by default
// DefaultResignGrace.
func TestLivenessResignWhileNamedAt(t *testing.T) {
	b := hb.New()
	electedController(b)
	resigned(b.At(100), 2, 3)
	b.At(5000).Phase()
	r := Liveness{Grace: time.Second}.Check(b.History())
	if r.Verdict != Invalid || len(r.Violations) != 1 {
		t.Fatalf("%s: %s", r.Verdict, r.Explanation)
	}
	if got, want := r.Violations[0].At, hb.T0+100*hb.Ms+int64(DefaultResignGrace); got != want {
		t.Errorf("At %d, want %d", got-hb.T0, want-hb.T0)
	}
	if !strings.Contains(r.Explanation, "longer than the "+DefaultResignGrace.String()+" grace") {
		t.Errorf("explanation %q does not name the grace", r.Explanation)
	}
}
