// Package config owns the node program's command line: every flag, the bug
// switches and the offline-election policy, with validation that turns bad
// input into a clear error (the entry point exits 2 on it).
//
// It must not start anything; it only describes how a node should run.
package config

import (
	"errors"
	"flag"
	"fmt"
	"github.com/zkchaos/zkchaos/history"
	"io"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// Bug switch names. Each restores a historical behaviour; all off is the
// fixed, current Kafka behaviour. The names are part of the harness contract
// and must not change.
const (
	// BugKafka532: brokers do not check the controller epoch, the controller's
	// ZooKeeper writes are not conditional on /controller_epoch and it does
	// not abort when a newer controller already wrote a partition state.
	BugKafka532 = "KAFKA-532"
	// BugKafka7235: no broker epoch. Brokers process control requests from a
	// previous generation, the controller does not detect bounced brokers by
	// czxid and does not check the epoch of ControlledShutdown.
	BugKafka7235 = "KAFKA-7235"
	// BugKafka16667: a controller's BADVERSION state write is retried with
	// its cached zkVersion forever instead of re-reading the state; its
	// reads never Sync, even with --proposals=zk-sync-before-read.
	BugKafka16667 = "KAFKA-16667"
	// BugKafka12671: a partition leader appends a transactional batch that
	// starts a transaction without asking the coordinator whether the
	// partition is in the producer's ongoing transaction (Kafka 2.6.3). A
	// produce that reaches the leader after its transaction was aborted
	// opens a transaction no coordinator will ever end. Off, the leader
	// verifies as Kafka 3.6 does (KIP-890's first part).
	BugKafka12671 = "KAFKA-12671"
)

// AllBugs lists every known switch.
var AllBugs = []string{BugKafka532, BugKafka7235, BugKafka16667, BugKafka12671}

// Proposal names. Each turns on a behaviour stricter than Kafka 2.6.3's;
// all off is Kafka 2.6.3 (with the bug switches' fixes as Kafka shipped
// them). The names are part of the harness contract.
const (
	// ProposalAckTimeoutOnLeaderLoss: an acks=all produce whose leader lost
	// leadership after the append answers REQUEST_TIMED_OUT (outcome
	// unknown), not NOT_LEADER_OR_FOLLOWER as Kafka's DelayedProduce does.
	ProposalAckTimeoutOnLeaderLoss = "ack-timeout-on-leader-loss"
	// ProposalCheckpointHosted: replication-offset-checkpoint holds every
	// log on disk, not only the partitions in the in-memory map (Kafka's
	// ReplicaManager.checkpointHighWatermarks); one not yet in memory keeps
	// its last checkpointed high watermark.
	ProposalCheckpointHosted = "checkpoint-hosted"
	// ProposalRefuseMidLogDamage: start-up fails on damage anywhere but the
	// torn tail of a log's last segment, instead of cutting the log at the
	// first invalid batch as Kafka's log recovery does.
	ProposalRefuseMidLogDamage = "refuse-mid-log-damage"
	// ProposalZKSyncBeforeRead: the controller issues a ZooKeeper sync
	// before each partition-state read, so its server is not behind the
	// ZooKeeper leader when it reads (Kafka 2.6.3 has no sync there;
	// ignored with KAFKA-16667 on).
	ProposalZKSyncBeforeRead = "zk-sync-before-read"
)

// AllProposals lists every proposal.
var AllProposals = []string{ProposalAckTimeoutOnLeaderLoss, ProposalCheckpointHosted, ProposalRefuseMidLogDamage, ProposalZKSyncBeforeRead}

// Proposals is the set of proposals turned on.
type Proposals map[string]bool

// On reports whether proposal name is turned on.
func (p Proposals) On(name string) bool { return p[name] }

// ParseProposals parses a comma-separated list of proposals; "all" turns on
// every one. An unknown name is an error naming the known ones.
func ParseProposals(s string) (Proposals, error) {
	p := Proposals{}
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		switch {
		case f == "":
		case f == "all":
			for _, n := range AllProposals {
				p[n] = true
			}
		case slices.Contains(AllProposals, f):
			p[f] = true
		default:
			return nil, fmt.Errorf("unknown proposal %q (known: %s, or all)", f, strings.Join(AllProposals, ", "))
		}
	}
	return p, nil
}

// Offline-election policies (KAFKA-3861).
const (
	PolicyOffline = "offline" // Kafka's default: no live ISR member, no leader
	PolicyUnclean = "unclean" // first live replica in assignment order
	// PolicyQueryLEO is the KAFKA-3861 report's proposal: ask the replicas
	// their LEOs and elect the largest only if all answer; the dead members
	// of an ISR below min.insync.replicas are excused (they acknowledged
	// nothing alone), and leaders hold the high watermark while their ISR
	// is below min.insync.replicas (KIP-966's rule), so the longest
	// surviving log holds every record a consumer could read.
	PolicyQueryLEO = "query-leo"
)

// Policies lists every offline-election policy.
var Policies = []string{PolicyOffline, PolicyUnclean, PolicyQueryLEO}

// Bugs is the set of switched-on bugs.
type Bugs map[string]bool

// On reports whether bug name is switched on.
func (b Bugs) On(name string) bool { return b[name] }

// List returns the switched-on bugs, sorted.
func (b Bugs) List() []string {
	out := make([]string, 0, len(b))
	for k, v := range b {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// ParseBugs parses a comma-separated list of bug switches. An unknown name is
// an error naming the known ones.
func ParseBugs(s string) (Bugs, error) {
	b := Bugs{}
	for _, f := range strings.Split(s, ",") {
		f = strings.ToUpper(strings.TrimSpace(f))
		if f == "" {
			continue
		}
		if !slices.Contains(AllBugs, f) {
			return nil, fmt.Errorf("unknown bug switch %q (known: %s)", f, strings.Join(AllBugs, ", "))
		}
		b[f] = true
	}
	return b, nil
}

// Config is one node's configuration.
type Config struct {
	BrokerID         int32
	ZKServers        []string
	ZKSessionTimeout time.Duration
	ZKRequestTimeout time.Duration
	ZKConnectTimeout time.Duration
	// ZKServerByID: the session uses only the ((id-1) mod n)-th server of
	// --zk, as a broker whose zookeeper.connect names its co-located server.
	// A scenario needs to know which server serves a broker's reads.
	ZKServerByID bool
	// ZKSyncBeforeRead: proposal zk-sync-before-read, not Kafka 2.6.3 behaviour (which has no
	// sync there): the controller Syncs before it reads a partition state,
	// so its ZooKeeper server is not behind the leader when it reads.
	// KAFKA-16667 on overrides it.
	ZKSyncBeforeRead bool
	// ExitOnRegistrationConflict: at start-up, a /brokers/ids/<id> that
	// another session still owns ends the process (exit 1), as Kafka's
	// KafkaServer.startup does on registerBroker's NodeExists; off, the
	// node waits for the old session to expire, which is what a supervisor
	// restarting Kafka amounts to.
	ExitOnRegistrationConflict bool

	Listen         string // Kafka listener, host:port
	AdvertisedHost string // host written into /brokers/ids/<id>
	AdvertisedPort int32
	AdminListen    string // admin HTTP, host:port

	DataDir  string
	EventLog string // JSONL history file; "" disables

	Bugs           Bugs
	Proposals      Proposals
	OfflinePolicy  string
	Failpoints     string // name=action;name=action
	MinInsyncRepl  int
	ReplicaLagTime time.Duration

	// Data plane: produce, fetch and replication.
	HWCheckpointInterval time.Duration
	ReplicaFetchWait     time.Duration
	MessageMaxBytes      int
	SegmentBytes         int64

	// Group coordinator (package group) and its __consumer_offsets topic.
	OffsetsTopicPartitions        int32
	OffsetsTopicReplicationFactor int
	OffsetsCommitTimeout          time.Duration
	GroupMinSessionTimeout        time.Duration
	GroupMaxSessionTimeout        time.Duration
	GroupInitialRebalanceDelay    time.Duration

	// Transaction coordinator (package txn) and its __transaction_state
	// topic.
	TransactionTopicPartitions        int32
	TransactionTopicReplicationFactor int
	TransactionMaxTimeout             time.Duration
	TransactionAbortInterval          time.Duration

	ControllerSocketTimeout  time.Duration
	ControlledShutdownRetry  int
	ControlledShutdownWait   time.Duration
	ControlledShutdownOnTerm bool

	// CheckFlags: exit after the flags (and failpoint specs) are parsed.
	// The harness runs the host build this way before it starts any
	// container, so a mistyped switch costs no set-up.
	CheckFlags bool
}

// failpointNames is history.FailpointNames, for the usage text.
var failpointNames = history.FailpointNames

// FailpointsEnv is the environment variable read for failpoints armed at
// start, in addition to --failpoints (the flag wins for a name in both).
const FailpointsEnv = "KAFKANODE_FAILPOINTS"

// Parse parses args (without the program name). The error is ready to print;
// flag.ErrHelp is returned for -h/--help after usage went to out.
func Parse(args []string, out io.Writer) (*Config, error) {
	c := &Config{}
	fs := flag.NewFlagSet("kafkanode", flag.ContinueOnError)
	fs.SetOutput(out)
	var id int
	var zkList, bugs, proposals string
	var advertised string
	fs.IntVar(&id, "id", -1, "broker id (required, >= 0)")
	fs.StringVar(&zkList, "zk", "", "ZooKeeper servers, comma-separated host:port (required)")
	fs.DurationVar(&c.ZKSessionTimeout, "zk-session-timeout", 4*time.Second, "ZooKeeper session timeout requested (the ensemble may clamp it)")
	fs.DurationVar(&c.ZKRequestTimeout, "zk-request-timeout", 10*time.Second, "upper bound for one ZooKeeper call; a call that exceeds it has an unknown outcome")
	fs.DurationVar(&c.ZKConnectTimeout, "zk-connect-timeout", 30*time.Second, "how long start-up waits for a first ZooKeeper session before failing (exit 1)")
	fs.BoolVar(&c.ZKServerByID, "zk-server-by-id", false, "connect only to the ((id-1) mod n)-th of the n --zk servers (a co-located server) instead of any of them")
	fs.BoolVar(&c.ExitOnRegistrationConflict, "exit-on-registration-conflict", false, "exit at start-up (status 1) when /brokers/ids/<id> is still held by another session, as Kafka 2.6.3 does, instead of waiting for that session to expire (needs a supervisor that restarts the node)")
	fs.StringVar(&c.Listen, "listen", "0.0.0.0:9092", "Kafka protocol listener")
	fs.StringVar(&advertised, "advertised", "", "host:port registered in /brokers/ids (default: this host's first non-loopback IPv4 and the listen port)")
	fs.StringVar(&c.AdminListen, "admin-listen", "", "admin HTTP listener for failpoints and state (default: advertised host, port 9093; \"off\" disables)")
	fs.StringVar(&c.DataDir, "data-dir", "/node/data", "data directory (partition logs and checkpoints)")
	fs.StringVar(&c.EventLog, "event-log", "/node/events.jsonl", "history JSONL file this node appends its events to (\"\" disables)")
	fs.StringVar(&bugs, "bugs", "", "bug switches to turn on, comma-separated: "+strings.Join(AllBugs, ", ")+" (default: none = fixed behaviour)")
	fs.StringVar(&proposals, "proposals", "", "behaviours stricter than Kafka 2.6.3 to turn on, comma-separated: "+strings.Join(AllProposals, ", ")+", or all (default: none = Kafka 2.6.3)")
	fs.StringVar(&c.OfflinePolicy, "offline-election", PolicyOffline, "leader election when no ISR member is live: "+strings.Join(Policies, "|"))
	fs.StringVar(&c.Failpoints, "failpoints", "", "failpoints armed at start: name=action;... (also $"+FailpointsEnv+"); actions: sleep(DUR), error, sigstop, pause, off; prefix N* to fire N times")
	fs.IntVar(&c.MinInsyncRepl, "min-insync-replicas", 1, "min.insync.replicas: acks=all produces need at least this many in-sync replicas")
	fs.DurationVar(&c.ReplicaLagTime, "replica-lag-time-max", 10*time.Second, "replica.lag.time.max.ms: a follower not caught up for this long leaves the ISR")
	fs.DurationVar(&c.HWCheckpointInterval, "hw-checkpoint-interval", time.Second, "replica.high.watermark.checkpoint.interval.ms: how often replication-offset-checkpoint is written")
	fs.DurationVar(&c.ReplicaFetchWait, "replica-fetch-wait-max", 500*time.Millisecond, "replica.fetch.wait.max.ms: a follower fetch's long poll")
	fs.IntVar(&c.MessageMaxBytes, "message-max-bytes", 1048588, "message.max.bytes: largest record batch accepted (MESSAGE_TOO_LARGE above)")
	fs.Int64Var(&c.SegmentBytes, "log-segment-bytes", 64<<20, "log.segment.bytes: size at which a partition log rolls a new segment")
	var offsetsParts int
	fs.IntVar(&offsetsParts, "offsets-topic-partitions", 3, "offsets.topic.num.partitions: partitions of __consumer_offsets when the first FindCoordinator creates it (Kafka's default is 50; a test cluster wants few)")
	fs.IntVar(&c.OffsetsTopicReplicationFactor, "offsets-topic-replication-factor", 3, "offsets.topic.replication.factor: __consumer_offsets is created only once this many brokers are live (COORDINATOR_NOT_AVAILABLE until then)")
	fs.DurationVar(&c.OffsetsCommitTimeout, "offsets-commit-timeout", 5*time.Second, "offsets.commit.timeout.ms: an offset commit or group write not replicated by then answers REQUEST_TIMED_OUT")
	fs.DurationVar(&c.GroupMinSessionTimeout, "group-min-session-timeout", 6*time.Second, "group.min.session.timeout.ms: smallest session timeout a group member may ask for")
	fs.DurationVar(&c.GroupMaxSessionTimeout, "group-max-session-timeout", 30*time.Minute, "group.max.session.timeout.ms: largest session timeout a group member may ask for")
	fs.DurationVar(&c.GroupInitialRebalanceDelay, "group-initial-rebalance-delay", 3*time.Second, "group.initial.rebalance.delay.ms: how long the first rebalance of an empty group waits for more members (0: none)")
	var txnParts int
	fs.IntVar(&txnParts, "transaction-topic-partitions", 3, "transaction.state.log.num.partitions: partitions of __transaction_state when the first FindCoordinator for a transactional id creates it (Kafka's default is 50)")
	fs.IntVar(&c.TransactionTopicReplicationFactor, "transaction-topic-replication-factor", 0, "transaction.state.log.replication.factor: __transaction_state is created only once this many brokers are live (0: the value of --offsets-topic-replication-factor)")
	fs.DurationVar(&c.TransactionMaxTimeout, "transaction-max-timeout", 15*time.Minute, "transaction.max.timeout.ms: largest transaction timeout an InitProducerId may ask for (INVALID_TRANSACTION_TIMEOUT above)")
	fs.DurationVar(&c.TransactionAbortInterval, "transaction-abort-interval", 10*time.Second, "transaction.abort.timed.out.transaction.cleanup.interval.ms: how often transactions past their timeout are aborted")
	fs.DurationVar(&c.ControllerSocketTimeout, "controller-socket-timeout", 5*time.Second, "timeout of one controller-to-broker request before it is retried")
	fs.IntVar(&c.ControlledShutdownRetry, "controlled-shutdown-retries", 3, "controlled.shutdown.max.retries")
	fs.DurationVar(&c.ControlledShutdownWait, "controlled-shutdown-backoff", time.Second, "controlled.shutdown.retry.backoff.ms")
	fs.BoolVar(&c.ControlledShutdownOnTerm, "controlled-shutdown", true, "on SIGTERM/SIGINT, ask the controller to move leadership away before exiting")
	fs.BoolVar(&c.CheckFlags, "check-flags", false, "check the flags and exit: 0 if a node could start with them, 2 (and the problem on stderr) if not")
	fs.Usage = func() {
		fmt.Fprintf(out, `kafkanode: a ZooKeeper-mode Kafka broker (any node may become the controller).

Failpoints (--failpoints, $%s, or PUT/DELETE http://ADMIN/failpoints/NAME,
POST .../NAME/release): %s.
Admin HTTP also serves GET /state and GET /failpoints.
Events go to --event-log as history JSONL (schema: package history).

Flags:
`, FailpointsEnv, strings.Join(failpointNames, ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var errs []error
	if id < 0 || id > 1<<30 {
		errs = append(errs, fmt.Errorf("--id: %d is not a valid broker id", id))
	}
	c.BrokerID = int32(id)
	for _, s := range strings.Split(zkList, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if _, _, err := net.SplitHostPort(s); err != nil {
				errs = append(errs, fmt.Errorf("--zk: %q: %v", s, err))
			}
			c.ZKServers = append(c.ZKServers, s)
		}
	}
	if len(c.ZKServers) == 0 {
		errs = append(errs, errors.New("--zk: at least one ZooKeeper server is required"))
	} else if c.ZKServerByID && id >= 1 {
		c.ZKServers = []string{c.ZKServers[(id-1)%len(c.ZKServers)]}
	} else if c.ZKServerByID {
		errs = append(errs, fmt.Errorf("--zk-server-by-id: broker id %d has no server (ids start at 1)", id))
	}
	b, err := ParseBugs(bugs)
	if err != nil {
		errs = append(errs, fmt.Errorf("--bugs: %w", err))
	}
	c.Bugs = b
	pr, err := ParseProposals(proposals)
	if err != nil {
		errs = append(errs, fmt.Errorf("--proposals: %w", err))
	}
	c.Proposals = pr
	c.ZKSyncBeforeRead = pr.On(ProposalZKSyncBeforeRead)
	if !slices.Contains(Policies, c.OfflinePolicy) {
		errs = append(errs, fmt.Errorf("--offline-election: unknown policy %q (known: %s)", c.OfflinePolicy, strings.Join(Policies, ", ")))
	}
	if c.MinInsyncRepl < 1 {
		errs = append(errs, fmt.Errorf("--min-insync-replicas: %d must be at least 1", c.MinInsyncRepl))
	}
	if c.ReplicaLagTime < 10*time.Millisecond || c.HWCheckpointInterval < time.Millisecond || c.ReplicaFetchWait < 0 {
		errs = append(errs, errors.New("--replica-lag-time-max, --hw-checkpoint-interval and --replica-fetch-wait-max must be positive"))
	}
	if c.MessageMaxBytes < 1024 || c.SegmentBytes < 1024 {
		errs = append(errs, errors.New("--message-max-bytes and --log-segment-bytes must be at least 1024"))
	}
	if offsetsParts < 1 || offsetsParts > 1000 {
		errs = append(errs, fmt.Errorf("--offsets-topic-partitions: %d is not in [1, 1000]", offsetsParts))
	}
	c.OffsetsTopicPartitions = int32(offsetsParts)
	if c.OffsetsTopicReplicationFactor < 1 {
		errs = append(errs, fmt.Errorf("--offsets-topic-replication-factor: %d must be at least 1", c.OffsetsTopicReplicationFactor))
	}
	if txnParts < 1 || txnParts > 1000 {
		errs = append(errs, fmt.Errorf("--transaction-topic-partitions: %d is not in [1, 1000]", txnParts))
	}
	c.TransactionTopicPartitions = int32(txnParts)
	if c.TransactionTopicReplicationFactor < 0 {
		errs = append(errs, fmt.Errorf("--transaction-topic-replication-factor: %d is negative", c.TransactionTopicReplicationFactor))
	}
	if c.TransactionTopicReplicationFactor == 0 {
		c.TransactionTopicReplicationFactor = c.OffsetsTopicReplicationFactor
	}
	if c.TransactionMaxTimeout <= 0 || c.TransactionAbortInterval <= 0 {
		errs = append(errs, errors.New("--transaction-max-timeout and --transaction-abort-interval must be positive"))
	}
	if c.OffsetsCommitTimeout <= 0 || c.GroupMinSessionTimeout <= 0 || c.GroupInitialRebalanceDelay < 0 {
		errs = append(errs, errors.New("--offsets-commit-timeout and --group-min-session-timeout must be positive, --group-initial-rebalance-delay not negative"))
	}
	if c.GroupMaxSessionTimeout < c.GroupMinSessionTimeout {
		errs = append(errs, fmt.Errorf("--group-max-session-timeout %s is below --group-min-session-timeout %s", c.GroupMaxSessionTimeout, c.GroupMinSessionTimeout))
	}
	if c.ZKSessionTimeout < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--zk-session-timeout: %s is too short", c.ZKSessionTimeout))
	}
	_, lport, err := net.SplitHostPort(c.Listen)
	if err != nil {
		errs = append(errs, fmt.Errorf("--listen: %v", err))
	}
	if advertised == "" {
		host := firstIPv4()
		advertised = net.JoinHostPort(host, lport)
	}
	ah, ap, err := net.SplitHostPort(advertised)
	if err != nil {
		errs = append(errs, fmt.Errorf("--advertised: %v", err))
	} else {
		var port int
		if _, err := fmt.Sscanf(ap, "%d", &port); err != nil || port <= 0 || port > 65535 {
			errs = append(errs, fmt.Errorf("--advertised: bad port %q", ap))
		}
		c.AdvertisedHost, c.AdvertisedPort = ah, int32(port)
	}
	if c.AdminListen == "" {
		c.AdminListen = net.JoinHostPort(c.AdvertisedHost, "9093")
	}
	if env := os.Getenv(FailpointsEnv); env != "" {
		if c.Failpoints == "" {
			c.Failpoints = env
		} else {
			c.Failpoints = env + ";" + c.Failpoints
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// firstIPv4 is the first non-loopback IPv4 address of this host: in a node
// container, its static address on the run's network.
func firstIPv4() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}
