package itest

import (
	"encoding/json"
	"github.com/twmb/franz-go/pkg/kerr"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

func failpointStart(name string) func(history.Event) bool {
	return func(ev history.Event) bool {
		return ev.Kind == history.KindFaultStart && ev.Fault != nil && ev.Fault.Failpoint == name
	}
}

func failpointStop(name string) func(history.Event) bool {
	return func(ev history.Event) bool {
		return ev.Kind == history.KindFaultStop && ev.Fault != nil && ev.Fault.Failpoint == name
	}
}

// Must show: one controller at a time; kill it → another broker becomes
// controller at epoch+1 within the session timeout; /controller_epoch and its
// zkVersion match what the node logged.
func TestControllerFailover(t *testing.T) {
	e := setup(t, "", nil)
	ctx := ctxT(t)
	e.waitAllRegistered()
	c := e.controller(30 * time.Second)
	elected, _ := e.waitEvent(c, 30*time.Second, "controller_elected", 0, isKind(history.KindControllerElected))
	for id := 1; id <= 3; id++ {
		if id == c {
			continue
		}
		if ev, ok := e.findEvent(id, 0, isKind(history.KindControllerElected)); ok {
			t.Fatalf("n%d also elected itself (epoch %d) while n%d is controller", id, ev.Controller.Epoch, c)
		}
	}
	checkEpochZnode(t, e, elected.Controller)

	if err := nemesis.Kill(ctx, e.node(c).Container); err != nil {
		t.Fatal(err)
	}
	// Measured from when the engine reports the process gone: its session
	// timer started at its last heartbeat, no later than that.
	killed := time.Now()
	var next history.Event
	var nextID int
	deadline := time.Now().Add(20 * time.Second)
	for nextID == 0 {
		for id := 1; id <= 3; id++ {
			if id == c {
				continue
			}
			if ev, ok := e.findEvent(id, 0, isKind(history.KindControllerElected)); ok {
				next, nextID = ev, id
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no new controller within 20s of killing the old one")
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Duration(next.Time - killed.UnixNano())
	t.Logf("n%d killed; n%d controller at epoch %d after %s (session timeout %s)", c, nextID, next.Controller.Epoch, took, sessionTimeout)
	if next.Controller.Epoch != elected.Controller.Epoch+1 {
		t.Fatalf("new controller epoch %d, want %d", next.Controller.Epoch, elected.Controller.Epoch+1)
	}
	// ZooKeeper expires the session on a tick boundary after the timeout;
	// allow a second for that and the election itself.
	if took > sessionTimeout+time.Second {
		t.Fatalf("re-election took %s, more than the session timeout %s (+1s)", took, sessionTimeout)
	}
	if got := e.controller(time.Second); got != nextID {
		t.Fatalf("/controller names %d, want %d", got, nextID)
	}
	checkEpochZnode(t, e, next.Controller)
	// Exactly one of the survivors is controller.
	for id := 1; id <= 3; id++ {
		if id != c && id != nextID {
			if _, ok := e.findEvent(id, 0, isKind(history.KindControllerElected)); ok {
				t.Fatalf("n%d elected itself too", id)
			}
		}
	}
}

func checkEpochZnode(t *testing.T, e *env, run *history.ControllerRun) {
	t.Helper()
	d, st, err := e.get(zkdata.ControllerEpochPath)
	if err != nil {
		t.Fatal(err)
	}
	epoch, err := zkdata.DecodeControllerEpoch(d)
	if err != nil {
		t.Fatal(err)
	}
	if run.Zxid != 0 && run.Zxid != st.Mzxid {
		t.Fatalf("node logged election zxid %d, /controller_epoch mzxid is %d", run.Zxid, st.Mzxid)
	}
	if epoch != run.Epoch || st.Version != run.EpochZkVersion {
		t.Fatalf("/controller_epoch = %d (zkVersion %d), node logged epoch %d zkVersion %d", epoch, st.Version, run.Epoch, run.EpochZkVersion)
	}
}

// Must show: SIGSTOP the controller past its session timeout, then SIGCONT:
// fixed — as Kafka 2.6.3's, it finds its session expired and resigns, and
// nothing it writes at the old epoch lands; with KAFKA-532 — the stale
// write succeeds. The controller is stopped exactly in
// its BrokerChange handler (failpoint, then SIGSTOP from outside: a PID 1
// cannot stop itself), so it has a write to make when it wakes up.
func TestZombieController(t *testing.T) {
	bugModes(t, "KAFKA-532", func(t *testing.T, bugs string) {
		e := setup(t, bugs, nil)
		ctx := ctxT(t)
		c := e.createTopicT()
		elected, _ := e.waitEvent(c, 30*time.Second, "controller_elected", 0, isKind(history.KindControllerElected))
		e.admin(c, "PUT", "/failpoints/"+failpoint.ControllerBeforeBrokerChange, "1*sigstop")
		v := other(c)
		if err := nemesis.Kill(ctx, e.node(v).Container); err != nil {
			t.Fatal(err)
		}
		fp, fpIdx := e.waitEvent(c, 20*time.Second, "failpoint "+failpoint.ControllerBeforeBrokerChange, 0, failpointStart(failpoint.ControllerBeforeBrokerChange))
		if !strings.Contains(fp.Fault.Detail, "awaiting external SIGSTOP") {
			t.Fatalf("PID 1 failpoint detail %q should say it awaits an external SIGSTOP", fp.Fault.Detail)
		}
		if err := nemesis.Pause(ctx, e.node(c).Container); err != nil {
			t.Fatal(err)
		}
		paused := time.Now()
		w := other(c, v)
		next, _ := e.waitEvent(w, 30*time.Second, "new controller", 0, func(ev history.Event) bool {
			return ev.Kind == history.KindControllerElected && ev.Controller.Epoch > elected.Controller.Epoch
		})
		t.Logf("n%d paused at its failpoint; n%d elected at epoch %d after %s", c, w, next.Controller.Epoch, time.Duration(next.Time-paused.UnixNano()))
		if err := nemesis.Resume(ctx, e.node(c).Container); err != nil {
			t.Fatal(err)
		}
		e.waitEvent(c, 10*time.Second, "failpoint released by SIGCONT", fpIdx, failpointStop(failpoint.ControllerBeforeBrokerChange))
		if bugs == "" {
			// Kafka 2.6.3: the resumed controller finds its session
			// expired, drops its queued events and resigns before a new
			// session exists (beforeInitializingSession → Expire); the
			// held BrokerChange fails at its next request. A write at the
			// old epoch that got out first is refused by the epoch fence.
			res, resIdx := e.waitEvent(c, 30*time.Second, "resignation", fpIdx, isKind(history.KindControllerResigned))
			if !strings.Contains(res.Controller.Reason, "session expired") && !strings.Contains(res.Controller.Reason, "controller moved") {
				t.Fatalf("resigned for %q, want session expired (or controller moved)", res.Controller.Reason)
			}
			for _, ev := range e.events(c)[fpIdx:resIdx] {
				if ev.Kind == history.KindZKWrite && ev.ZKWrite.State != nil && ev.ZKWrite.ControllerEpoch == elected.Controller.Epoch &&
					ev.ZKWrite.Outcome == history.ZKOK {
					t.Fatalf("fixed: the zombie's write at its old epoch %d landed: %+v", elected.Controller.Epoch, *ev.ZKWrite)
				}
			}
			e.expectVerdict(checkers.ControllerFencing{}, bugs)
			return
		}
		wr, _ := e.waitEvent(c, 30*time.Second, "the zombie's partition-state write", fpIdx, func(ev history.Event) bool {
			return ev.Kind == history.KindZKWrite && ev.ZKWrite.State != nil
		})
		t.Logf("zombie write: %+v", *wr.ZKWrite)
		if wr.ZKWrite.ControllerEpoch != elected.Controller.Epoch {
			t.Fatalf("zombie wrote with epoch %d, want its old epoch %d", wr.ZKWrite.ControllerEpoch, elected.Controller.Epoch)
		}
		if wr.ZKWrite.Conditional || wr.ZKWrite.Outcome != history.ZKOK {
			t.Fatalf("KAFKA-532: zombie write conditional=%v outcome %s, want an unconditional write that succeeds", wr.ZKWrite.Conditional, wr.ZKWrite.Outcome)
		}
		e.expectVerdict(checkers.ControllerFencing{}, bugs)
	})
}

// Must show: a LeaderAndIsr with a lower controller epoch than the broker has
// seen: fixed — rejected with 11 and logged; with KAFKA-532 — accepted.
func TestStaleControllerEpoch(t *testing.T) {
	bugModes(t, "KAFKA-532", func(t *testing.T, bugs string) {
		e := setup(t, bugs, nil)
		regs := e.waitAllRegistered()
		c := e.controller(30 * time.Second)
		b := other(c)
		seen, _ := e.waitEvent(b, 30*time.Second, "a control request from the controller", 0, func(ev history.Event) bool {
			return ev.Kind == history.KindControlRequest && ev.Control.ControllerEpoch >= 1 && ev.Control.Verdict == history.VerdictAccepted
		})
		epoch := seen.Control.ControllerEpoch
		n0 := len(e.events(b))
		resp := e.request(b, leaderAndIsr(int32(c), epoch-1, regs[b], "stale-controller", int32(b), 0)).(*kmsg.LeaderAndISRResponse)
		ev, _ := e.waitEvent(b, 10*time.Second, "control_request for the stale request", n0, func(ev history.Event) bool {
			return ev.Kind == history.KindControlRequest && ev.Control.API == history.APILeaderAndIsr && ev.Control.ControllerEpoch == epoch-1
		})
		if ev.Control.KnownControllerEpoch != epoch {
			t.Fatalf("logged known controller epoch %d, want %d", ev.Control.KnownControllerEpoch, epoch)
		}
		if bugs == "" {
			if resp.ErrorCode != kerr.StaleControllerEpoch.Code || ev.Control.Verdict != history.VerdictRejected || ev.Control.ErrorCode != kerr.StaleControllerEpoch.Code {
				t.Fatalf("fixed: response error %d, logged %s/%d; want rejected with 11", resp.ErrorCode, ev.Control.Verdict, ev.Control.ErrorCode)
			}
		} else if resp.ErrorCode != 0 || len(resp.Partitions) != 1 || resp.Partitions[0].ErrorCode != 0 || ev.Control.Verdict != history.VerdictAccepted {
			t.Fatalf("KAFKA-532: response %+v, logged %s; want accepted", resp, ev.Control.Verdict)
		}
		e.expectVerdict(checkers.ControllerFencing{}, bugs)
	})
}

// Must show: broker epoch = czxid of /brokers/ids/N; after a restart a
// request carrying the old epoch is rejected with 77 (fixed) and accepted
// (KAFKA-7235); the controller detects a bounce that left the id set
// unchanged (fixed) and misses it (KAFKA-7235); controlled shutdown with a
// stale broker epoch is refused (fixed).
func TestBrokerEpoch(t *testing.T) {
	bugModes(t, "KAFKA-7235", func(t *testing.T, bugs string) {
		e := setup(t, bugs, nil)
		ctx := ctxT(t)
		regs := e.waitAllRegistered()
		e.createTopic("t", 3)
		c := e.controller(30 * time.Second)
		elected, _ := e.waitEvent(c, 30*time.Second, "controller_elected", 0, isKind(history.KindControllerElected))
		b := other(c)
		for id := 1; id <= 3; id++ {
			_, st, err := e.get(zkdata.BrokerPath(int32(id)))
			if err != nil {
				t.Fatal(err)
			}
			if st.Czxid != regs[id] {
				t.Fatalf("n%d logged broker epoch %d, /brokers/ids/%d czxid is %d", id, regs[id], id, st.Czxid)
			}
		}
		e.waitEvent(b, 30*time.Second, "role_change", 0, isKind(history.KindRoleChange))

		// Hold the controller before it reads /brokers/ids, bounce b,
		// let b re-register, then let the controller look.
		e.admin(c, "PUT", "/failpoints/"+failpoint.ControllerBeforeBrokerChange, "1*pause")
		n0 := len(e.events(b))
		if _, err := nemesis.Bounce(ctx, e.node(b).Container); err != nil {
			t.Fatal(err)
		}
		_, fpIdx := e.waitEvent(c, 30*time.Second, "failpoint "+failpoint.ControllerBeforeBrokerChange, 0, failpointStart(failpoint.ControllerBeforeBrokerChange))
		reg, regIdx := e.waitEvent(b, 30*time.Second, "re-registration", n0, isKind(history.KindBrokerRegistered))
		newEpoch := reg.Registration.BrokerEpoch
		if newEpoch <= regs[b] {
			t.Fatalf("new broker epoch %d not above old %d", newEpoch, regs[b])
		}
		if _, st, err := e.get(zkdata.BrokerPath(int32(b))); err != nil || st.Czxid != newEpoch {
			t.Fatalf("after restart /brokers/ids/%d czxid %v (err %v), logged %d", b, st, err, newEpoch)
		}
		e.admin(c, "POST", "/failpoints/"+failpoint.ControllerBeforeBrokerChange+"/release", "")
		e.waitEvent(c, 10*time.Second, "failpoint released", fpIdx, failpointStop(failpoint.ControllerBeforeBrokerChange))
		if bugs == "" {
			ev, _ := e.waitEvent(b, 15*time.Second, "LeaderAndIsr after the bounce", regIdx, func(ev history.Event) bool {
				return ev.Kind == history.KindControlRequest && ev.Control.API == history.APILeaderAndIsr
			})
			if ev.Control.BrokerEpoch != newEpoch || ev.Control.Verdict != history.VerdictAccepted {
				t.Fatalf("fixed: LeaderAndIsr after bounce carried epoch %d (%s), want %d accepted", ev.Control.BrokerEpoch, ev.Control.Verdict, newEpoch)
			}
		} else {
			time.Sleep(3 * time.Second)
			if ev, ok := e.findEvent(b, regIdx, func(ev history.Event) bool {
				return ev.Kind == history.KindControlRequest && ev.Control.API == history.APILeaderAndIsr
			}); ok {
				t.Fatalf("KAFKA-7235: the controller should miss the bounce, but sent %+v", *ev.Control)
			}
		}
		var st struct {
			Controller struct {
				Bounces int `json:"bounces_detected"`
			} `json:"controller"`
		}
		if err := json.Unmarshal([]byte(e.admin(c, "GET", "/state", "")), &st); err != nil {
			t.Fatal(err)
		}
		wantBounces := 1
		if bugs != "" {
			wantBounces = 0
		}
		if st.Controller.Bounces != wantBounces {
			t.Fatalf("controller detected %d bounces, want %d", st.Controller.Bounces, wantBounces)
		}

		// A request from b's previous generation.
		resp := e.request(b, leaderAndIsr(int32(c), elected.Controller.Epoch, regs[b], "old-generation", int32(b), 0)).(*kmsg.LeaderAndISRResponse)
		wantCode := kerr.StaleBrokerEpoch.Code
		if bugs != "" {
			wantCode = 0
		}
		if resp.ErrorCode != wantCode {
			t.Fatalf("LeaderAndIsr with old broker epoch %d (current %d): error %d, want %d", regs[b], newEpoch, resp.ErrorCode, wantCode)
		}
		// A ControlledShutdown from b's previous generation.
		n1 := len(e.events(c))
		cs := kmsg.NewPtrControlledShutdownRequest()
		cs.SetVersion(3)
		cs.BrokerID, cs.BrokerEpoch = int32(b), regs[b]
		csr := e.request(c, cs).(*kmsg.ControlledShutdownResponse)
		sev, _ := e.waitEvent(c, 10*time.Second, "controlled_shutdown", n1, isKind(history.KindControlledShutdown))
		if bugs == "" {
			if csr.ErrorCode != kerr.StaleBrokerEpoch.Code || sev.Shutdown.Verdict != history.VerdictRejected || sev.Shutdown.CachedBrokerEpoch != newEpoch {
				t.Fatalf("fixed: stale ControlledShutdown answered %d, logged %+v; want refused with 77 against cached %d", csr.ErrorCode, *sev.Shutdown, newEpoch)
			}
		} else if csr.ErrorCode == kerr.StaleBrokerEpoch.Code || sev.Shutdown.Verdict != history.VerdictAccepted {
			t.Fatalf("KAFKA-7235: stale ControlledShutdown answered %d (%s), want accepted", csr.ErrorCode, sev.Shutdown.Verdict)
		}
		e.expectVerdict(checkers.BrokerFencing{}, bugs)
	})
}

// Must show: each failpoint, armed, stops the program at its window, seen
// through the event log. (controller-before-broker-change is also exercised
// by TestZombieController and TestBrokerEpoch.)
func TestFailpointsStopAtWindow(t *testing.T) {
	e := setup(t, "", map[int]map[string]string{3: {"KAFKANODE_FAILPOINTS": failpoint.BrokerBeforeRegister + "=pause"}})
	ctx := ctxT(t)

	// broker-before-register: armed at start through the environment.
	e.waitEvent(3, 60*time.Second, "failpoint "+failpoint.BrokerBeforeRegister, 0, failpointStart(failpoint.BrokerBeforeRegister))
	time.Sleep(500 * time.Millisecond)
	if _, ok := e.findEvent(3, 0, isKind(history.KindBrokerRegistered)); ok {
		t.Fatal("n3 registered although held at broker-before-register")
	}
	e.zk.Sync(zkdata.BrokerPath(3))
	if ok, _, _ := e.zk.Exists(zkdata.BrokerPath(3)); ok {
		t.Fatal("/brokers/ids/3 exists although n3 is held before registering")
	}
	e.admin(3, "POST", "/failpoints/"+failpoint.BrokerBeforeRegister+"/release", "")
	c := e.createTopicT()

	// controller-after-zk-write: a broker dies, the controller writes the
	// new leaders and stops before telling anyone.
	e.admin(c, "PUT", "/failpoints/"+failpoint.ControllerAfterZKWrite, "1*pause")
	v := other(c)
	n0 := len(e.events(c))
	if err := nemesis.Kill(ctx, e.node(v).Container); err != nil {
		t.Fatal(err)
	}
	_, fpIdx := e.waitEvent(c, 20*time.Second, "failpoint "+failpoint.ControllerAfterZKWrite, n0, failpointStart(failpoint.ControllerAfterZKWrite))
	evs := e.events(c)
	found := false
	for i := n0; i < fpIdx; i++ {
		if evs[i].Kind == history.KindZKWrite && evs[i].ZKWrite.State != nil && evs[i].ZKWrite.Outcome == history.ZKOK {
			found = true
		}
	}
	if !found {
		t.Fatal("no successful partition-state write before the failpoint")
	}
	time.Sleep(time.Second)
	if ev, ok := e.findEvent(c, fpIdx, func(ev history.Event) bool {
		return ev.Kind == history.KindControlSent && ev.Control.API == history.APILeaderAndIsr
	}); ok {
		t.Fatalf("LeaderAndIsr sent while held after the ZK write: %+v", *ev.Control)
	}
	e.admin(c, "POST", "/failpoints/"+failpoint.ControllerAfterZKWrite+"/release", "")
	e.waitEvent(c, 10*time.Second, "LeaderAndIsr after release", fpIdx, func(ev history.Event) bool {
		return ev.Kind == history.KindControlSent && ev.Control.API == history.APILeaderAndIsr
	})

	// broker-during-controlled-shutdown: SIGTERM, the controller moves
	// leadership away, the broker holds before leaving.
	w := other(c, v)
	e.admin(w, "PUT", "/failpoints/"+failpoint.BrokerControlledShutdown, "pause")
	n1 := len(e.events(c))
	if err := e.node(w).Container.Signal(ctx, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	e.waitEvent(w, 30*time.Second, "failpoint "+failpoint.BrokerControlledShutdown, 0, failpointStart(failpoint.BrokerControlledShutdown))
	e.waitEvent(c, 5*time.Second, "controlled_shutdown accepted", n1, func(ev history.Event) bool {
		return ev.Kind == history.KindControlledShutdown && ev.Shutdown.BrokerID == int32(w) && ev.Shutdown.Verdict == history.VerdictAccepted
	})
	time.Sleep(500 * time.Millisecond)
	if st, err := e.node(w).Container.State(ctx); err != nil || !st.Running {
		t.Fatalf("n%d should still run while held (state %+v, err %v)", w, st, err)
	}
	if _, ok := e.findEvent(w, 0, isKind(history.KindNodeStop)); ok {
		t.Fatal("node_stop logged while held in controlled shutdown")
	}
	e.admin(w, "POST", "/failpoints/"+failpoint.BrokerControlledShutdown+"/release", "")
	e.waitEvent(w, 20*time.Second, "node_stop", 0, isKind(history.KindNodeStop))
}

// KAFKA-16667 mechanism: the controller's cached zkVersion of a partition
// state goes stale (here an outside write, as a leader's ISR update whose
// notification the controller has not processed yet; in the seed, a stale
// read through a lagging ZooKeeper follower). KAFKA-16667: it writes at the
// cached version and retries it forever. Fixed, as Kafka 2.6.3's
// doElectLeaderForPartitions: the election reads the state first and writes
// at the version read, so the outside write costs no BADVERSION at all (a
// read through a lagging server would, and the next round reads again).
func TestStaleCachedZkVersion(t *testing.T) {
	bugModes(t, "KAFKA-16667", func(t *testing.T, bugs string) {
		e := setup(t, bugs, nil)
		ctx := ctxT(t)
		c := e.createTopicT()
		v := other(c)
		// t-p is led by p%3+1; pick the partition v leads and rewrite its
		// state behind the controller's back (same content, new version).
		p := int32((v + 2) % 3)
		path := zkdata.PartitionStatePath("t", p)
		d, st, err := e.get(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.zk.Set(path, d, st.Version); err != nil {
			t.Fatal(err)
		}
		n0 := len(e.events(c))
		if err := nemesis.Kill(ctx, e.node(v).Container); err != nil {
			t.Fatal(err)
		}
		first, idx := e.waitEvent(c, 20*time.Second, "state write after the broker died", n0, func(ev history.Event) bool {
			return ev.Kind == history.KindZKWrite && ev.ZKWrite.Path == path
		})
		if bugs == "" {
			if first.ZKWrite.Outcome != history.ZKOK || first.ZKWrite.ExpectedVersion != st.Version+1 || first.ZKWrite.State.Leader == int32(v) {
				t.Fatalf("first write %+v, want ok at the version read (%d) with a new leader", *first.ZKWrite, st.Version+1)
			}
			return
		}
		if first.ZKWrite.Outcome != history.ZKBadVersion || first.ZKWrite.ExpectedVersion != st.Version {
			t.Fatalf("first write %+v, want badversion against cached version %d", *first.ZKWrite, st.Version)
		}
		time.Sleep(3 * time.Second)
		evs := e.events(c)
		attempts := 0
		for _, ev := range evs[idx:] {
			if ev.Kind == history.KindZKWrite && ev.ZKWrite.Path == path {
				if ev.ZKWrite.Outcome != history.ZKBadVersion || ev.ZKWrite.ExpectedVersion != st.Version {
					t.Fatalf("KAFKA-16667: write %+v, want the same stale version again", *ev.ZKWrite)
				}
				attempts++
			}
		}
		if attempts < 3 {
			t.Fatalf("KAFKA-16667: %d attempts in 3s, want the controller stuck retrying", attempts)
		}
		t.Logf("KAFKA-16667: %d BADVERSION retries with cached version %d", attempts, st.Version)
	})
}
