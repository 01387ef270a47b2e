// Package node assembles one node program process: event log, failpoints,
// admin HTTP, the Kafka-protocol server, the ZooKeeper session, the broker's
// registration and the controller, and their orderly shutdown (controlled
// shutdown first, as a Kafka broker does on SIGTERM).
//
// Sub-packages own the pieces (see their doc comments); this package only
// wires them. The harness never imports any of it: it runs cmd/kafkanode and
// reads the event log.
//
// The process's interfaces, for the harness:
//   - Kafka listener (--listen): Produce v3-9, Fetch v4-12, ListOffsets
//     v1-6, Metadata v0-11, OffsetForLeaderEpoch v0-3
//     (package dataplane), OffsetCommit v1-8, OffsetFetch v1-7,
//     FindCoordinator v0-3, JoinGroup v0-7, Heartbeat v0-4, LeaveGroup
//     v0-4, SyncGroup v0-5, DescribeGroups v0-5, ListGroups v0-4 (package
//     group, wired in groups.go), InitProducerId v0-3, AddPartitionsToTxn
//     v0-1, AddOffsetsToTxn v0-1, EndTxn v0-1, WriteTxnMarkers v0 (package
//     txn, wired in txns.go), LeaderAndIsr v0-4, StopReplica v0-3,
//     UpdateMetadata v0-6, ControlledShutdown v0-3, ApiVersions v0-3. Other
//     APIs or versions close the connection (ApiVersions answers v0 with
//     UNSUPPORTED_VERSION), as Kafka does.
//   - Admin HTTP (--admin-listen): GET /debug/pprof/...; GET /state (broker epoch, known
//     controller epoch, partition map, controller status with live brokers
//     and bounces detected, armed failpoints); GET /failpoints;
//     PUT|POST /failpoints/{name} with an action as body (refused when read
//     after its Zkchaos-Arm-Before deadline); DELETE
//     /failpoints/{name}; POST /failpoints/{name}/release.
//   - Event log (--event-log): history JSONL, source "n<id>": node_start,
//     node_stop, broker_registered, controller_elected, controller_resigned,
//     zk_write, control_sent, control_request, controlled_shutdown,
//     role_change, produce_append, produce_ack, hw_advance, isr_change,
//     hw_checkpoint, truncation, group_request, txn_request, txn_marker,
//     and fault_start/fault_stop (Name
//     "failpoint") when a failpoint fires.
//   - Signals: SIGTERM/SIGINT → controlled shutdown, then exit 0.
package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/twmb/franz-go/pkg/kerr"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/controller"
	"github.com/zkchaos/zkchaos/node/dataplane"
	"github.com/zkchaos/zkchaos/node/eventlog"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/wire"
	"github.com/zkchaos/zkchaos/node/zkdata"
	"github.com/zkchaos/zkchaos/node/zkutil"
)

// Node is one running node program.
type Node struct {
	cfg    *config.Config
	log    *eventlog.Log
	fp     *failpoint.Registry
	broker *broker.Broker
	data   *dataplane.Manager
	ctrl   *controller.Controller
	groups *groups
	txns   *txns
	sess   *zkutil.Session
	server *wire.Server

	regMu     sync.Mutex
	regSessID int64
}

// Run runs a node until ctx ends (SIGTERM), then shuts it down. stderr gets
// the human log.
func Run(ctx context.Context, cfg *config.Config, stderr io.Writer) (err error) {
	n := &Node{cfg: cfg}
	var w *history.Writer
	if cfg.EventLog != "" {
		w, err = history.Create(cfg.EventLog, fmt.Sprintf("n%d", cfg.BrokerID), cfg.BrokerID)
		if err != nil {
			return fmt.Errorf("event log: %w", err)
		}
	}
	n.log = eventlog.New(w, cfg.BrokerID, stderr)
	defer n.log.Close()
	incarnation := time.Now().UnixNano()
	n.log.Emit(history.Event{Kind: history.KindNodeStart, Process: &history.Process{Incarnation: incarnation, Bugs: cfg.Bugs.List(), Policy: cfg.OfflinePolicy}})
	if cfg.DataDir != "" {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
	}

	n.fp = failpoint.New()
	fpIDs := map[string]string{}
	var fpMu sync.Mutex
	n.fp.OnHit = func(h failpoint.Hit) {
		fpMu.Lock()
		id := fmt.Sprintf("fp-n%d-%d-%s-%d", cfg.BrokerID, incarnation, h.Name, h.Seq)
		fpIDs[h.Name] = id
		fpMu.Unlock()
		n.log.Failpoint(h.Phase == "start", id, h.Name, fmt.Sprintf("%s %s %s", h.Name, h.Action, h.Detail))
		n.log.Sync()
	}
	if err := n.fp.ArmSpec(cfg.Failpoints); err != nil {
		return fmt.Errorf("failpoints: %w", err)
	}
	if cfg.DataDir != "" {
		if err := n.fp.ArmOnceFile(filepath.Join(cfg.DataDir, failpoint.OnceFile)); err != nil {
			return err
		}
	}

	n.broker = broker.New(cfg.BrokerID, cfg.Bugs, n.log)
	n.broker.FP = n.fp
	// The data plane opens every log on disk before the node listens: a
	// corrupt log is a start-up error naming the file (LogManager.loadLogs).
	n.data, err = dataplane.Open(dataplane.Config{
		BrokerID: cfg.BrokerID, DataDir: cfg.DataDir, Bugs: cfg.Bugs, Proposals: cfg.Proposals, MinISR: cfg.MinInsyncRepl,
		HWNeedsMinISR: cfg.OfflinePolicy == config.PolicyQueryLEO,
		LagTime:       cfg.ReplicaLagTime, CheckpointInterval: cfg.HWCheckpointInterval, FetchMaxWait: cfg.ReplicaFetchWait,
		MaxMessageBytes: cfg.MessageMaxBytes, SegmentBytes: cfg.SegmentBytes, Failpoints: n.fp,
	}, n.log, n.broker.Metadata)
	if err != nil {
		return err
	}
	defer n.data.Close()
	// The group coordinator rides on the data plane: its role changes of
	// __consumer_offsets partitions load and unload groups.
	n.groups = newGroups(n)
	defer n.groups.close()
	n.txns = newTxns(n, n.data)
	defer n.txns.close()
	n.data.SetTxnVerifier(n.txns.verify)
	n.broker.Data = groupDataPlane{n.data, n.groups, n.txns}

	// Admin HTTP first, so failpoints can be armed and released while the
	// node is still starting (broker-before-register).
	var admin *http.Server
	if cfg.AdminListen != "off" {
		ln, err := net.Listen("tcp", cfg.AdminListen)
		if err != nil {
			return fmt.Errorf("admin listener %s: %w", cfg.AdminListen, err)
		}
		admin = &http.Server{Handler: n.adminMux(), ReadHeaderTimeout: 5 * time.Second}
		go admin.Serve(ln)
		defer admin.Close()
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("kafka listener %s: %w", cfg.Listen, err)
	}
	n.server = wire.NewServer()
	n.server.OnError = func(remote net.Addr, hdr *wire.RequestHeader, err error) {
		if hdr != nil {
			n.log.Printf("kafka request from %s (api %d v%d corr %d): %v", remote, hdr.APIKey, hdr.APIVersion, hdr.CorrelationID, err)
		} else {
			n.log.Printf("kafka connection from %s: %v", remote, err)
		}
	}
	n.routes()
	n.data.Routes(n.server)
	n.groups.routes(n.server)
	n.txns.routes(n.server, n.groups)
	serveDone := make(chan struct{})
	go func() {
		defer close(serveDone)
		if err := n.server.Serve(ln); err != nil {
			n.log.Printf("kafka server: %v", err)
		}
	}()
	defer func() { n.server.Close(); <-serveDone }()

	// ZooKeeper.
	n.sess, err = zkutil.Connect(cfg.ZKServers, cfg.ZKSessionTimeout, cfg.ZKRequestTimeout)
	if err != nil {
		return err
	}
	defer n.sess.Close()
	cctx, cancel := context.WithTimeout(ctx, cfg.ZKConnectTimeout)
	err = n.sess.WaitSession(cctx)
	cancel()
	if err != nil {
		return fmt.Errorf("zookeeper %v unreachable: %w", cfg.ZKServers, err)
	}
	n.log.Printf("zookeeper session 0x%x (timeout %s requested)", n.sess.Conn.SessionID(), cfg.ZKSessionTimeout)
	n.data.SetSession(n.sess)
	n.groups.sess.Store(n.sess)
	n.txns.sess.Store(n.sess)
	for _, p := range zkdata.PersistentPaths {
		if err := zkutil.EnsurePath(ctx, n.sess, p); err != nil {
			return fmt.Errorf("zookeeper layout: %w", err)
		}
	}
	if err := n.fp.Eval(ctx, failpoint.BrokerBeforeRegister); err != nil {
		return fmt.Errorf("start-up aborted: %w", err)
	}
	if err := registerAtStartup(ctx, n.cfg.ExitOnRegistrationConflict, 200*time.Millisecond,
		func() error { return n.register(ctx, n.cfg.ExitOnRegistrationConflict) }, n.log.Printf); err != nil {
		return err
	}

	n.ctrl = controller.New(controller.Config{
		BrokerID: cfg.BrokerID, Bugs: cfg.Bugs, OfflinePolicy: cfg.OfflinePolicy,
		MinInsync: cfg.MinInsyncRepl, SocketTimeout: cfg.ControllerSocketTimeout, SyncBeforeRead: cfg.ZKSyncBeforeRead,
		LEOQuery: controller.ListOffsetsLEO(fmt.Sprintf("controller-%d", cfg.BrokerID)),
		OnNewSession: func(ctx context.Context) {
			if err := n.register(ctx, false); err != nil {
				n.log.Printf("re-registration failed: %v", err)
			}
		},
	}, n.sess, n.log, n.fp)
	ctrlCtx, stopCtrl := context.WithCancel(context.Background())
	go n.ctrl.Run(ctrlCtx)
	defer func() {
		stopCtrl()
		<-n.ctrl.Done()
		n.ctrl.Close()
	}()
	// An expiry is found when the client reconnects: go-zookeeper reports
	// StateExpired from its connection loop, then makes a new session.
	// Holding this callback holds that new session back until the
	// controller has resigned, as ZooKeeperClient.reinitialize waits for
	// KafkaController's beforeInitializingSession. A replaced session
	// means new ephemerals: tell the controller, whose event loop
	// re-registers and re-elects (afterInitializingSession).
	var lastSess int64 = n.sess.Conn.SessionID()
	var sessMu sync.Mutex
	n.sess.OnEvent(func(ev zk.Event) {
		if ev.Type != zk.EventSession {
			return
		}
		if ev.State == zk.StateExpired {
			n.log.Printf("zookeeper session expired; the controller resigns before a new session is made")
			n.ctrl.SessionExpired()
			return
		}
		if ev.State != zk.StateHasSession {
			return
		}
		id := n.sess.Conn.SessionID()
		sessMu.Lock()
		changed := id != lastSess
		lastSess = id
		sessMu.Unlock()
		if changed {
			n.log.Printf("new zookeeper session 0x%x", id)
			n.ctrl.NewSession(id)
		}
	})

	<-ctx.Done()
	n.log.Printf("shutting down")
	if cfg.ControlledShutdownOnTerm {
		n.controlledShutdown()
	}
	// Fetchers stop, the last checkpoint is written, logs are closed.
	n.data.Close()
	n.log.Emit(history.Event{Kind: history.KindNodeStop, Process: &history.Process{Incarnation: incarnation, Bugs: cfg.Bugs.List(), Policy: cfg.OfflinePolicy, Reason: "signal"}})
	return nil
}

// registerAtStartup runs the start-up registration, again after a pause
// each time our own ZooKeeper session expired during it (the broker cut off
// from ZooKeeper past the session timeout): without exitOnConflict the node
// stands for a supervisor that starts Kafka again after a failed start-up
// (broker.Register's wait for another session's znode), and each start has
// a session of its own. Kafka's registerBroker throws on SESSIONEXPIRED and
// KafkaServer.startup exits, which exitOnConflict keeps. Only start-up does
// this: a re-registration after an expiry runs on the controller's event
// loop, which the next session waits for (Controller.SessionExpired).
func registerAtStartup(ctx context.Context, exitOnConflict bool, pause time.Duration, register func() error, logf func(string, ...any)) error {
	for {
		err := register()
		if err == nil || exitOnConflict || !errors.Is(err, zkutil.ErrSessionLost) || ctx.Err() != nil {
			return err
		}
		logf("%v: registering again on the next session", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}

// register (re-)creates /brokers/ids/<id> for the current session;
// exitOnConflict is broker.Register's (start-up only: Kafka's re-registration
// after a session expiry deletes a znode left by its own previous session).
func (n *Node) register(ctx context.Context, exitOnConflict bool) error {
	n.regMu.Lock()
	defer n.regMu.Unlock()
	sid := n.sess.Conn.SessionID()
	if sid == n.regSessID && n.broker.Epoch() > 0 {
		return nil
	}
	czxid, err := broker.Register(ctx, n.sess, n.cfg.BrokerID, n.cfg.AdvertisedHost, n.cfg.AdvertisedPort, exitOnConflict, n.log.Printf)
	if err != nil {
		return err
	}
	n.regSessID = sid
	n.broker.SetEpoch(czxid)
	n.log.Emit(history.Event{Kind: history.KindBrokerRegistered, Registration: &history.Registration{BrokerID: n.cfg.BrokerID, BrokerEpoch: czxid, Host: n.cfg.AdvertisedHost, Port: n.cfg.AdvertisedPort}})
	return nil
}

func (n *Node) routes() {
	n.server.Handle(4, 0, 4, func(ctx context.Context, _ *wire.ConnInfo, hdr wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		if err := n.broker.AwaitRegistration(ctx); err != nil {
			return nil, err
		}
		return n.broker.HandleLeaderAndIsr(hdr, req.(*kmsg.LeaderAndISRRequest)), nil
	})
	n.server.Handle(5, 0, 3, func(ctx context.Context, _ *wire.ConnInfo, hdr wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		if err := n.broker.AwaitRegistration(ctx); err != nil {
			return nil, err
		}
		return n.broker.HandleStopReplica(hdr, req.(*kmsg.StopReplicaRequest)), nil
	})
	n.server.Handle(6, 0, 6, func(ctx context.Context, _ *wire.ConnInfo, hdr wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		if err := n.broker.AwaitRegistration(ctx); err != nil {
			return nil, err
		}
		return n.broker.HandleUpdateMetadata(hdr, req.(*kmsg.UpdateMetadataRequest)), nil
	})
	n.server.Handle(7, 0, 3, func(ctx context.Context, _ *wire.ConnInfo, hdr wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		if n.ctrl == nil {
			// Not started yet: not the controller, which Kafka answers as
			// doControlledShutdown does (ControllerMovedException).
			r := kmsg.NewPtrControlledShutdownResponse()
			r.ErrorCode = kerr.StaleControllerEpoch.Code
			return r, nil
		}
		return n.ctrl.ControlledShutdown(ctx, hdr, req.(*kmsg.ControlledShutdownRequest)), nil
	})
}

// controlledShutdown is KafkaServer.controlledShutdown: ask the controller
// to move leadership away, retrying while partitions remain.
func (n *Node) controlledShutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n.cfg.ControlledShutdownRetry+1)*(n.cfg.ControllerSocketTimeout+n.cfg.ControlledShutdownWait))
	defer cancel()
	for attempt := 1; attempt <= n.cfg.ControlledShutdownRetry; attempt++ {
		ok, err := n.controlledShutdownOnce(ctx)
		if err != nil {
			n.log.Printf("controlled shutdown attempt %d: %v", attempt, err)
		}
		if ok {
			n.fp.Eval(ctx, failpoint.BrokerControlledShutdown)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.cfg.ControlledShutdownWait):
		}
	}
	n.log.Printf("controlled shutdown did not complete; shutting down anyway")
}

func (n *Node) controlledShutdownOnce(ctx context.Context) (bool, error) {
	data, err := zkutil.Call(ctx, n.sess, func(c *zk.Conn) ([]byte, error) {
		d, _, err := c.Get(zkdata.ControllerPath)
		return d, err
	})
	if err != nil {
		return false, fmt.Errorf("find controller: %w", err)
	}
	cid, err := zkdata.DecodeController(data)
	if err != nil {
		return false, err
	}
	reg, err := zkutil.Call(ctx, n.sess, func(c *zk.Conn) ([]byte, error) {
		d, _, err := c.Get(zkdata.BrokerPath(cid))
		return d, err
	})
	if err != nil {
		return false, fmt.Errorf("controller %d endpoint: %w", cid, err)
	}
	br, err := zkdata.DecodeBroker(cid, reg)
	if err != nil {
		return false, err
	}
	cl := wire.NewClient(net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port))), fmt.Sprintf("broker-%d", n.cfg.BrokerID))
	defer cl.Close()
	req := kmsg.NewPtrControlledShutdownRequest()
	req.SetVersion(3)
	req.BrokerID = n.cfg.BrokerID
	req.BrokerEpoch = n.broker.Epoch()
	meant := req.BrokerEpoch
	if n.cfg.Bugs.On(config.BugKafka7235) {
		req.BrokerEpoch = -1
	}
	n.log.Emit(history.Event{Kind: history.KindControlledShutdown, Shutdown: &history.Shutdown{BrokerID: n.cfg.BrokerID,
		BrokerEpoch: req.BrokerEpoch, MeantBrokerEpoch: meant, Verdict: history.VerdictSent}})
	rctx, cancel := context.WithTimeout(ctx, n.cfg.ControllerSocketTimeout*2)
	defer cancel()
	resp, err := cl.Request(rctx, req)
	if err != nil {
		return false, err
	}
	r := resp.(*kmsg.ControlledShutdownResponse)
	n.log.Printf("controlled shutdown via controller %d: error %d, %d partitions remaining", cid, r.ErrorCode, len(r.PartitionsRemaining))
	return r.ErrorCode == 0 && len(r.PartitionsRemaining) == 0, nil
}

// State is the admin /state document.
type State struct {
	BrokerID             int32              `json:"broker_id"`
	BrokerEpoch          int64              `json:"broker_epoch"`
	KnownControllerEpoch int32              `json:"known_controller_epoch"`
	SessionID            string             `json:"zk_session_id"`
	Bugs                 []string           `json:"bugs"`
	Controller           *controller.Status `json:"controller,omitempty"`
	Partitions           []broker.Partition `json:"partitions"`
	Failpoints           map[string]string  `json:"failpoints"`
	// Logs is the data plane's view: every log on disk with HW and LEO.
	Logs []dataplane.PartitionInfo `json:"logs"`
}

func (n *Node) state() State {
	s := State{BrokerID: n.cfg.BrokerID, BrokerEpoch: n.broker.Epoch(), KnownControllerEpoch: n.broker.KnownControllerEpoch(),
		Bugs: n.cfg.Bugs.List(), Partitions: n.broker.Replicas.All(), Failpoints: n.fp.Armed()}
	if n.data != nil {
		s.Logs = n.data.Hosted()
	}
	if n.sess != nil {
		s.SessionID = fmt.Sprintf("0x%x", n.sess.Conn.SessionID())
	}
	if n.ctrl != nil {
		st := n.ctrl.Status()
		s.Controller = &st
	}
	return s
}

func (n *Node) adminMux() *http.ServeMux {
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, n.state()) })
	// Profiles for benchmarks (BENCHMARKS.md): the admin port is bound to
	// the container's own address.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /failpoints", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, n.fp.Armed()) })
	arm := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1024))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		late, err := armTooLate(r.Header.Get(history.FailpointArmBeforeHeader), time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if late {
			// Read after the harness stopped waiting (this process was
			// stopped meanwhile): armed now, the failpoint would hold
			// with nobody to end the hold.
			n.log.Printf("failpoint %s: arm request read after its deadline, refused", r.PathValue("name"))
			http.Error(w, "arm request read after its deadline", http.StatusRequestTimeout)
			return
		}
		a, err := failpoint.ParseAction(string(body))
		if err == nil {
			err = n.fp.Arm(r.PathValue("name"), a)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n.log.Printf("failpoint %s armed: %s", r.PathValue("name"), a)
		w.WriteHeader(http.StatusNoContent)
	}
	mux.HandleFunc("PUT /failpoints/{name}", arm)
	mux.HandleFunc("POST /failpoints/{name}", arm)
	mux.HandleFunc("DELETE /failpoints/{name}", func(w http.ResponseWriter, r *http.Request) {
		if err := n.fp.Disarm(r.PathValue("name")); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /failpoints/{name}/release", func(w http.ResponseWriter, r *http.Request) {
		if err := n.fp.Release(r.PathValue("name")); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// armTooLate says whether an arm request whose FailpointArmBeforeHeader is
// before (Unix nanoseconds; empty: no deadline) was read after it, at now.
func armTooLate(before string, now time.Time) (bool, error) {
	if before == "" {
		return false, nil
	}
	ns, err := strconv.ParseInt(before, 10, 64)
	if err != nil {
		return false, fmt.Errorf("%s %q: %w", history.FailpointArmBeforeHeader, before, err)
	}
	return now.UnixNano() > ns, nil
}
