package checkers

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/rundir/rundirtest"
)

// czxids lists broker id's znode in /brokers/ids with czxid, as the
// watcher logs a listing.
func czxids(b *hb.Builder, id int32, czxid int64) int {
	return b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/brokers/ids", Type: history.WatchChildren,
		Brokers: []history.BrokerZnode{{ID: id, Czxid: czxid}}}})
}

// epochZnode is the watcher's view of /controller_epoch holding epoch at
// mzxid, at version epoch (created holding 0, then one set per election).
func epochZnode(b *hb.Builder, epoch int32, mzxid int64) int {
	return epochVersion(b, epoch, epoch, mzxid)
}

func epochVersion(b *hb.Builder, epoch, version int32, mzxid int64) int {
	return b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/controller_epoch", Type: history.WatchChanged,
		Data: fmt.Sprint(epoch), Mzxid: mzxid, Version: version, ControllerEpoch: &epoch}})
}

// controllerZnode is the watcher's view of /controller naming id, created
// at czxid.
func controllerZnode(b *hb.Builder, id int32, czxid int64) int {
	return b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/controller", Type: history.WatchChanged,
		Czxid: czxid, Mzxid: czxid, ControllerID: &id}})
}

// leaderAndIsrSent logs a LeaderAndIsr from controller node to broker 2 at epoch.
func leaderAndIsrSent(b *hb.Builder, node, epoch int32) int {
	return b.Add(history.Event{Kind: history.KindControlSent, Node: node, Control: &history.Control{
		API: history.APILeaderAndIsr, ControllerID: node, ControllerEpoch: epoch, TargetBroker: 2, Attempt: 1,
		Partitions: []history.ControlPartition{{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 3}}}})
}

// ctrlStateWrite logs a controller's fenced write of t-0's state at epoch
// (fencing version ver) holding controller_epoch stateEpoch.
func ctrlStateWrite(b *hb.Builder, node, epoch, ver, stateEpoch int32) int {
	return b.Add(history.Event{Kind: history.KindZKWrite, Node: node, ZKWrite: &history.ZKWrite{
		Path: "/brokers/topics/t/partitions/0/state", Op: "set", Conditional: true, ControllerEpoch: epoch, EpochZkVersion: ver,
		Outcome: history.ZKOK, State: &history.PartitionState{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 3, ControllerEpoch: stateEpoch, ISR: []int32{2}}}})
}

// eventTimes matches the "+d" times explanations give events.
var eventTimes = regexp.MustCompile(`( \(\+[0-9.]+[mµn]?s\)|, \+[0-9.]+[mµn]?s)`)

// shutdownHandled logs controller node's handling of broker 2's
// ControlledShutdown at epoch with verdict.
func shutdownHandled(b *hb.Builder, node, epoch int32, verdict string) int {
	return b.Add(history.Event{Kind: history.KindControlledShutdown, Node: node, Shutdown: &history.Shutdown{
		BrokerID: 2, BrokerEpoch: 102, CachedBrokerEpoch: 102, ControllerEpoch: epoch, Verdict: verdict}})
}

// zkWriteAt logs node's successful write of path at zxid, holding state
// (partition states) or data (/controller_epoch).
func zkWriteAt(b *hb.Builder, node int32, path string, zxid int64, state *history.PartitionState, data string) int {
	return b.Add(history.Event{Kind: history.KindZKWrite, Node: node, ZKWrite: &history.ZKWrite{Path: path, Op: "set",
		ControllerEpoch: 1, EpochZkVersion: 1, Conditional: true, Outcome: history.ZKOK, Zxid: zxid, State: state, Data: data}})
}

type promiseCase struct {
	name    string
	build   func(b *hb.Builder)
	want    Verdict
	explain string // in the explanation when set
}

func runPromiseCases(t *testing.T, c Checker, cases []promiseCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			r := verdictOf(t, c, tt.build, tt.want)
			// Times are left out of the expectations: the builder's
			// events are 1 ms apart, below the 10 ms explanations show.
			if !strings.Contains(eventTimes.ReplaceAllString(r.Explanation, ""), tt.explain) {
				t.Fatalf("explanation %q does not contain %q", r.Explanation, tt.explain)
			}
			if tt.want == Invalid && len(r.Events) == 0 {
				t.Fatalf("an invalid verdict cites no event: %s", r.Explanation)
			}
		})
	}
}

func TestRegistration(t *testing.T) {
	runPromiseCases(t, Registration{}, []promiseCase{
		{name: "restarts and a session expiry, each a new znode", want: Valid, build: func(b *hb.Builder) {
			b.Start(1)
			b.Register(1, 100)
			czxids(b, 1, 100)
			b.Start(1)
			czxids(b, 1, 120)
			b.Register(1, 120)
			b.Register(1, 130) // a new session of the same process
			czxids(b, 1, 130)
		}},
		{name: "three processes with one czxid", want: Invalid,
			explain: "registered with broker epoch (czxid) 4294967316 at event 3, from the process started at event 2, the same czxid as its registration at event 1 from the process started at event 0",
			build: func(b *hb.Builder) {
				for range 3 {
					b.Start(1)
					b.Register(1, 4294967316)
				}
			}},
		{name: "a later process below an earlier czxid", want: Invalid, explain: "a czxid below the 200 of its registration at event 1", build: func(b *hb.Builder) {
			b.Start(1)
			b.Register(1, 200)
			b.Start(1)
			b.Register(1, 150)
		}},
		{name: "one process logs its czxid again for a new session", want: Invalid, explain: "the same czxid as its registration at event 1 from the same process", build: func(b *hb.Builder) {
			b.Start(1)
			b.Register(1, 100)
			b.Register(1, 100)
		}},
		{name: "a predecessor's znode, listed before the process started", want: Invalid,
			explain: "the ZooKeeper watcher had listed /brokers/ids/1 with that czxid at event 2, before the process started", build: func(b *hb.Builder) {
				b.Start(1)
				b.Register(1, 100)
				czxids(b, 1, 110) // a re-registration the killed process never logged
				b.Start(1)
				b.Register(1, 110)
			}},
		{name: "a czxid the watcher listed after the process started", want: Valid, build: func(b *hb.Builder) {
			b.Start(1)
			czxids(b, 1, 110)
			b.Register(1, 110)
		}},
	})
}

func TestControllerEpoch(t *testing.T) {
	runPromiseCases(t, ControllerEpoch{}, []promiseCase{
		{name: "each election one higher, as the znode shows", want: Valid, build: func(b *hb.Builder) {
			epochZnode(b, 0, 10)
			elected(b, 1, 1, 11)
			controllerZnode(b, 1, 11)
			epochZnode(b, 1, 11)
			elected(b, 2, 2, 20)
			epochZnode(b, 2, 20)
			elected(b, 1, 3, 0) // a retried Multi: no zxid
			epochZnode(b, 3, 30)
		}},
		{name: "a new ensemble starts again from 0", want: Valid, build: func(b *hb.Builder) {
			epochZnode(b, 0, 10)
			epochZnode(b, 1, 11)
			b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/controller_epoch", Type: history.WatchDeleted}})
			epochZnode(b, 0, 12)
			epochZnode(b, 1, 13)
		}},
		{name: "five elections at epoch 1 while the znode stays 0", want: Invalid,
			explain: "controller 1's election at epoch 1 (event 1) and controller 2's election at epoch 1 (event 3) share one controller epoch",
			build: func(b *hb.Builder) {
				epochZnode(b, 0, 10)
				for i := range 5 {
					elected(b, int32(i%3+1), 1, int64(11+i))
					epochZnode(b, 0, int64(11+i))
				}
			}},
		{name: "two elections at one epoch", want: Invalid, explain: "share one controller epoch", build: func(b *hb.Builder) {
			elected(b, 1, 4, 0)
			elected(b, 2, 4, 0)
		}},
		{name: "a later zxid at a lower epoch", want: Invalid, explain: "controller 2's election at epoch 2 (event 1), at zxid 20, came after controller 1's election at epoch 3 (event 0) at zxid 10 in ZooKeeper's order but at a lower epoch",
			build: func(b *hb.Builder) {
				elected(b, 1, 3, 10)
				elected(b, 2, 2, 20)
			}},
		{name: "one node's later election at a lower epoch", want: Invalid, explain: "came after controller 1's election at epoch 5 (event 0) in its own log", build: func(b *hb.Builder) {
			elected(b, 1, 5, 0)
			elected(b, 1, 4, 0)
		}},
		{name: "the znode rewritten without an increment", want: Invalid,
			explain: "/controller_epoch was rewritten from 2 (mzxid 10, event 0) to 2 (mzxid 12, event 1)", build: func(b *hb.Builder) {
				epochZnode(b, 2, 10)
				epochZnode(b, 2, 12)
			}},
		{name: "an election at an epoch the znode does not hold", want: Invalid,
			explain: "controller 1's election at epoch 2 (event 1) with /controller_epoch version 2 wrote /controller_epoch at zxid 5, where the ZooKeeper watcher saw it hold 1 at version 1 (event 0)", build: func(b *hb.Builder) {
				epochZnode(b, 1, 5)
				elected(b, 1, 2, 5)
			}},
		{name: "an election at a fencing version the znode does not have", want: Invalid,
			explain: "with /controller_epoch version 2 wrote /controller_epoch at zxid 5, where the ZooKeeper watcher saw it hold 2 at version 3", build: func(b *hb.Builder) {
				epochVersion(b, 2, 3, 5)
				elected(b, 1, 2, 5)
			}},
		{name: "the /controller of the election names another broker", want: Invalid,
			explain: "controller 1's election at epoch 2 (event 2) created /controller at zxid 5, where the ZooKeeper watcher saw it name broker 3 (event 0)", build: func(b *hb.Builder) {
				controllerZnode(b, 3, 5)
				epochZnode(b, 2, 5)
				elected(b, 1, 2, 5)
			}},
	})
}

func TestControllerTenure(t *testing.T) {
	runPromiseCases(t, ControllerTenure{}, []promiseCase{
		{name: "sends and writes while elected", want: Valid, build: func(b *hb.Builder) {
			b.Start(1)
			// The election's own writes come before controller_elected.
			b.Add(history.Event{Kind: history.KindZKWrite, Node: 1, ZKWrite: &history.ZKWrite{Path: "/controller_epoch", Op: "multi",
				Conditional: true, ControllerEpoch: 1, EpochZkVersion: 0, Outcome: history.ZKOK}})
			elected(b, 1, 1, 11)
			ctrlStateWrite(b, 1, 1, 1, 1)
			leaderAndIsrSent(b, 1, 1)
			resigned(b, 1, 1)
			elected(b, 1, 3, 30)
			leaderAndIsrSent(b, 1, 3)
		}},
		{name: "a zombie's sends before it resigns", want: Valid, build: func(b *hb.Builder) {
			b.Start(1)
			b.Start(2)
			elected(b, 1, 1, 11)
			elected(b, 2, 2, 20)
			leaderAndIsrSent(b, 1, 1)
			resigned(b, 1, 1)
		}},
		{name: "a leader's ISR write outside any tenure", want: Valid, build: func(b *hb.Builder) {
			b.Start(2)
			b.Add(history.Event{Kind: history.KindZKWrite, Node: 2, ZKWrite: &history.ZKWrite{Path: "/brokers/topics/t/partitions/0/state",
				Op: "set", Outcome: history.ZKOK, State: &history.PartitionState{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 3, ControllerEpoch: 1, ISR: []int32{2}}}})
		}},
		{name: "a process whose start the history lacks", want: Valid, explain: "judged for neither", build: func(b *hb.Builder) {
			leaderAndIsrSent(b, 1, 1)
		}},
		{name: "sends after resigning", want: Invalid,
			explain: "controller 1 resigned epoch 1 (event 3) and then sent 2 control requests from event 4 to event 5, the first being LeaderAndIsr to broker 2 at controller epoch 1, without being elected again",
			build: func(b *hb.Builder) {
				b.Start(1)
				elected(b, 1, 1, 11)
				leaderAndIsrSent(b, 1, 1)
				resigned(b, 1, 1)
				leaderAndIsrSent(b, 1, 1)
				leaderAndIsrSent(b, 1, 1)
			}},
		{name: "a write after resigning", want: Invalid, explain: "and then made 1 controller ZooKeeper write from event 3, the first being a set of /brokers/topics/t/partitions/0/state",
			build: func(b *hb.Builder) {
				b.Start(1)
				elected(b, 1, 1, 11)
				resigned(b, 1, 1)
				ctrlStateWrite(b, 1, 1, 1, 1)
			}},
		{name: "sends from a process never elected", want: Invalid,
			explain: "broker 1 sent 1 control request from event 1, the first being LeaderAndIsr to broker 2 at controller epoch 1, without having been elected controller since its process started (event 0)",
			build: func(b *hb.Builder) {
				b.Start(1)
				leaderAndIsrSent(b, 1, 1)
			}},
		{name: "a restarted process sends at its predecessor's tenure", want: Invalid, explain: "without having been elected controller since its process started (event 2)",
			build: func(b *hb.Builder) {
				b.Start(1)
				elected(b, 1, 1, 11)
				b.Start(1)
				leaderAndIsrSent(b, 1, 1)
			}},
		{name: "a send at an older epoch", want: Invalid,
			explain: "controller 1, elected at epoch 3 with /controller_epoch version 3 (event 1), sent LeaderAndIsr to broker 2 at controller epoch 2 (event 2)",
			build: func(b *hb.Builder) {
				b.Start(1)
				elected(b, 1, 3, 11)
				leaderAndIsrSent(b, 1, 2)
			}},
		{name: "a send naming another controller", want: Invalid, explain: "naming controller 3", build: func(b *hb.Builder) {
			b.Start(1)
			elected(b, 1, 3, 11)
			b.Add(history.Event{Kind: history.KindControlSent, Node: 1, Control: &history.Control{
				API: history.APIUpdateMetadata, ControllerID: 3, ControllerEpoch: 3, TargetBroker: 2, Attempt: 1}})
		}},
		{name: "a state holding another controller epoch", want: Invalid, explain: "holding controller_epoch 2", build: func(b *hb.Builder) {
			b.Start(1)
			elected(b, 1, 3, 11)
			ctrlStateWrite(b, 1, 3, 3, 2)
		}},
		{name: "a ControlledShutdown refused after resigning", want: Valid, build: func(b *hb.Builder) {
			b.Start(1)
			elected(b, 1, 1, 11)
			resigned(b, 1, 1)
			shutdownHandled(b, 1, 1, history.VerdictRejected)
		}},
		{name: "a ControlledShutdown acted on after resigning", want: Invalid,
			explain: "and then handled 1 ControlledShutdown from event 3, the first being the ControlledShutdown of broker 2 at controller epoch 1",
			build: func(b *hb.Builder) {
				b.Start(1)
				elected(b, 1, 1, 11)
				resigned(b, 1, 1)
				shutdownHandled(b, 1, 1, history.VerdictAccepted)
			}},
		{name: "a ControlledShutdown at another epoch", want: Invalid, explain: "handled the ControlledShutdown of broker 2 at controller epoch 2",
			build: func(b *hb.Builder) {
				b.Start(1)
				elected(b, 1, 3, 11)
				shutdownHandled(b, 1, 2, history.VerdictAccepted)
			}},
		{name: "a write guarded by another fencing version", want: Invalid, explain: "guarded by /controller_epoch version 2", build: func(b *hb.Builder) {
			b.Start(1)
			elected(b, 1, 3, 11)
			ctrlStateWrite(b, 1, 3, 2, 3)
		}},
	})
}

func TestZKWrites(t *testing.T) {
	state := func(leader, le, ce int32, isr ...int32) *history.PartitionState {
		return &history.PartitionState{Topic: "t", Partition: 0, Leader: leader, LeaderEpoch: le, ControllerEpoch: ce, ISR: isr}
	}
	const statePath = "/brokers/topics/t/partitions/0/state"
	runPromiseCases(t, ZKWrites{}, []promiseCase{
		{name: "the watcher saw what was written", want: Valid, explain: "2 ZooKeeper writes", build: func(b *hb.Builder) {
			zkWriteAt(b, 1, statePath, 20, state(2, 3, 1, 2, 3), "")
			b.State(tp0, 2, 3, 1, 20, 2, 3)
			zkWriteAt(b, 1, "/controller_epoch", 21, nil, "2")
			epochZnode(b, 2, 21)
			zkWriteAt(b, 1, statePath, 22, state(3, 4, 1, 3), "") // the watcher missed this version
		}},
		{name: "a state ZooKeeper does not hold", want: Invalid,
			explain: "broker 1 logged its write of /brokers/topics/t/partitions/0/state (set, event 0) as leader 2, leader epoch 3, controller epoch 1, ISR [2 3], but ZooKeeper held leader 2, leader epoch 3, controller epoch 0, ISR [2 3] at that write's zxid 20 (watcher, event 1)",
			build: func(b *hb.Builder) {
				zkWriteAt(b, 1, statePath, 20, state(2, 3, 1, 2, 3), "")
				b.State(tp0, 2, 3, 0, 20, 2, 3)
			}},
		{name: "an epoch ZooKeeper does not hold", want: Invalid, explain: "as 1, but ZooKeeper held 0 at that write's zxid 21", build: func(b *hb.Builder) {
			zkWriteAt(b, 1, "/controller_epoch", 21, nil, "1")
			epochZnode(b, 0, 21)
		}},
	})
}

// A leader's ISR write it gave up, that ZooKeeper applied all the same:
// judged by what the leader did next with the ISR the write replaced.
func TestZKWritesGivenUpISRWrite(t *testing.T) {
	const statePath = "/brokers/topics/t/partitions/0/state"
	// givenUp logs broker 2's shrink of t-0 from [2 3] to [2] at leader
	// epoch 4, zkVersion 7 expected, given up with outcome.
	givenUp := func(b *hb.Builder, outcome string) {
		b.Add(history.Event{Kind: history.KindZKWrite, Node: 2, ZKWrite: &history.ZKWrite{Start: b.Now(), Path: statePath, Op: "set",
			ExpectedVersion: 7, Outcome: outcome, Error: "timed out",
			State: &history.PartitionState{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 4, ControllerEpoch: 1, ISR: []int32{2}}}})
		b.Add(history.Event{Kind: history.KindISRChange, Node: 2, ISR: &history.ISRChange{Topic: "t", Partition: 0, Action: history.ISRShrink,
			Old: []int32{2, 3}, New: []int32{2}, LeaderEpoch: 4, ZkVersion: -1, Outcome: outcome}})
	}
	held := func(b *hb.Builder, version int32, isr ...int32) {
		b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: statePath, Type: history.WatchChanged, Mzxid: 40, Version: version,
			State: &history.PartitionState{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 4, ControllerEpoch: 1, ISR: isr}}})
	}
	advance := func(b *hb.Builder) {
		b.Add(history.Event{Kind: history.KindHWAdvance, Node: 2, HW: &history.HWAdvance{Topic: "t", Partition: 0, Old: 10, New: 12, LeaderEpoch: 4}})
	}
	took := func(b *hb.Builder) {
		b.Add(history.Event{Kind: history.KindISRChange, Node: 2, ISR: &history.ISRChange{Topic: "t", Partition: 0, Action: history.ISRShrink,
			Old: []int32{2, 3}, New: []int32{2}, LeaderEpoch: 4, ZkVersion: 8, Outcome: history.ZKOK}})
	}
	runPromiseCases(t, ZKWrites{}, []promiseCase{
		{name: "applied, then the high watermark advanced on the old ISR", want: Invalid,
			explain: "but ZooKeeper applied it (the watcher saw leader 2, leader epoch 4, ISR [2] at zkVersion 8",
			build: func(b *hb.Builder) {
				givenUp(b, history.ZKConnectionLoss)
				held(b, 8, 2)
				advance(b)
			}},
		{name: "applied, and taken in (the resend met BADVERSION and read it back) before any advance", want: Valid, build: func(b *hb.Builder) {
			givenUp(b, history.ZKConnectionLoss)
			held(b, 8, 2)
			took(b)
			advance(b)
		}},
		{name: "not applied: ZooKeeper kept the old ISR", want: Valid, build: func(b *hb.Builder) {
			givenUp(b, history.ZKError)
			held(b, 8, 2, 3)
			advance(b)
		}},
		{name: "applied at another zkVersion than the write expected", want: Valid, build: func(b *hb.Builder) {
			givenUp(b, history.ZKConnectionLoss)
			held(b, 9, 2)
			advance(b)
		}},
		{name: "applied across an expired session: the broker registered again (Kafka's own)", want: Valid, build: func(b *hb.Builder) {
			givenUp(b, history.ZKConnectionLoss)
			b.Register(2, 300)
			held(b, 8, 2)
			advance(b)
		}},
		{name: "applied, then the broker restarted before any advance", want: Valid, build: func(b *hb.Builder) {
			givenUp(b, history.ZKConnectionLoss)
			held(b, 8, 2)
			b.Start(2)
			advance(b)
		}},
	})
}

// The stored real runs break none of these promises: the KAFKA-532 runs'
// harm is a zombie controller's epoch accepted and its writes landing,
// which controller-fencing judges; the zombie sent and wrote before it
// resigned.
func TestControlPromisesOnStoredRuns(t *testing.T) {
	for _, dir := range []string{
		rundirtest.Stored(rundirtest.Kafka532),
		filepath.Join("..", "history", "testdata", "kafka532-run"),
		filepath.Join("..", "testdata", "regressions", "kafka-532-zombie-controller"),
	} {
		h, err := history.ReadDir(dir)
		if err != nil {
			t.Fatalf("read %s: %v", dir, err)
		}
		for _, c := range []Checker{Registration{}, ControllerEpoch{}, ControllerTenure{}, ZKWrites{}} {
			if r := c.Check(h); r.Verdict != Valid {
				t.Errorf("%s on %s: %s: %s", r.Checker, dir, r.Verdict, r.Explanation)
			}
		}
	}
}
