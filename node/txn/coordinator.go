package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error codes the coordinator answers with.
var (
	errNone                    int16
	errUnknownServer           = kerr.UnknownServerError.Code
	errInvalidRequest          = kerr.InvalidRequest.Code
	errInvalidTimeout          = kerr.InvalidTransactionTimeout.Code
	errInvalidProducerEpoch    = kerr.InvalidProducerEpoch.Code
	errInvalidPIDMapping       = kerr.InvalidProducerIDMapping.Code
	errConcurrentTransactions  = kerr.ConcurrentTransactions.Code
	errInvalidTxnState         = kerr.InvalidTxnState.Code
	errNotCoordinator          = kerr.NotCoordinator.Code
	errCoordinatorNotAvailable = kerr.CoordinatorNotAvailable.Code
	errLoadInProgress          = kerr.CoordinatorLoadInProgress.Code
)

// Config holds the broker settings the coordinator reads; zero fields take
// Kafka 2.6.3's defaults.
type Config struct {
	// NumPartitions is transaction.state.log.num.partitions (50).
	NumPartitions int32
	// MaxTimeout is transaction.max.timeout.ms (15 min).
	MaxTimeout time.Duration
	// AbortInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s).
	AbortInterval time.Duration
	// RequestTimeout bounds one WriteTxnMarkers exchange
	// (request.timeout.ms, 30 s).
	RequestTimeout time.Duration
	// RetryBackoff is the pause before markers are sent again to a
	// partition whose leader failed or is unknown (the sender thread's
	// poll; 100 ms here).
	RetryBackoff time.Duration
}

func (c Config) withDefaults() Config {
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = 15 * time.Minute
	}
	if c.AbortInterval <= 0 {
		c.AbortInterval = 10 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	return c
}

// Log is ReplicaManager.appendRecords with acks=-1 on a
// __transaction_state partition this broker leads, split as group.Log is:
// Append must not block (it runs under the coordinator's lock); committed
// waits for the high watermark to pass the record. Errors that are a
// *kerr.Error keep their code.
type Log interface {
	Append(partition int32, key, value []byte) (offset int64, committed func(ctx context.Context) error, err error)
}

// ProducerIDs is ProducerIdManager.generateProducerId.
type ProducerIDs interface {
	NextProducerID(ctx context.Context) (int64, error)
}

// Marker is one WriteTxnMarkers entry (TxnMarkerEntry).
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	Partitions       []TopicPartition
}

// Markers is the coordinator's network: the metadata cache's partition
// leaders and the inter-broker WriteTxnMarkers.
type Markers interface {
	// Leader is the live leader of tp (ok false: none known now).
	Leader(tp TopicPartition) (broker int32, ok bool)
	// Send sends m to broker and returns each partition's error code; an
	// error means no answer (the request is sent again).
	Send(ctx context.Context, broker int32, m Marker) (map[TopicPartition]int16, error)
}

// Coordinator is TransactionCoordinator with TransactionStateManager's
// cache. One mutex guards all of it; appends and marker sends run outside.
type Coordinator struct {
	cfg     Config
	log     Log
	pids    ProducerIDs
	markers Markers
	onEvent func(Event)
	now     func() time.Time

	mu      sync.Mutex
	active  bool
	owned   map[int32]int32 // partition → coordinator epoch, loaded
	loading map[int32]int32 // partition → coordinator epoch, being loaded
	txns    map[string]*meta

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Options are the coordinator's collaborators.
type Options struct {
	Config  Config
	Log     Log
	PIDs    ProducerIDs
	Markers Markers
	// OnEvent hears every request answered, load, unload, marker round
	// and completion; it runs under the coordinator's lock and must not
	// block or call back.
	OnEvent func(Event)
	// Now defaults to time.Now.
	Now func() time.Time
}

// New returns a coordinator that owns no partition yet; it aborts timed-out
// transactions every AbortInterval until Close.
func New(o Options) *Coordinator {
	if o.Now == nil {
		o.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{cfg: o.Config.withDefaults(), log: o.Log, pids: o.PIDs, markers: o.Markers, onEvent: o.OnEvent, now: o.Now,
		active: true, owned: map[int32]int32{}, loading: map[int32]int32{}, txns: map[string]*meta{}, ctx: ctx, cancel: cancel}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(c.cfg.AbortInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.AbortTimedOut()
			}
		}
	}()
	return c
}

// Close is TransactionCoordinator.shutdown: later requests answer
// NOT_COORDINATOR, appends and marker sends in flight end.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.active = false
	c.owned, c.loading, c.txns = map[int32]int32{}, map[int32]int32{}, map[string]*meta{}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// PartitionFor is the __transaction_state partition of id.
func (c *Coordinator) PartitionFor(id string) int32 { return PartitionFor(id, c.cfg.NumPartitions) }

func (c *Coordinator) nowMs() int64 { return c.now().UnixMilli() }

// stateLocked is getTransactionState: the id's metadata with the
// partition's coordinator epoch, or the error a request answers.
func (c *Coordinator) stateLocked(id string) (*meta, int32, int16) {
	p := c.PartitionFor(id)
	if _, ok := c.loading[p]; ok {
		return nil, 0, errLoadInProgress
	}
	epoch, ok := c.owned[p]
	if !ok || !c.active {
		return nil, 0, errNotCoordinator
	}
	return c.txns[id], epoch, errNone
}

// appendErr is appendTransactionToLog's mapping of an append's error.
func appendErr(err error) int16 {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return errCoordinatorNotAvailable
		}
		return errUnknownServer
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return errCoordinatorNotAvailable
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return errNotCoordinator
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		return errUnknownServer
	}
	return ke.Code
}

// appendLocked is appendTransactionToLog: write tr for m at coordEpoch;
// once committed (or failed) done runs under the lock with the answer,
// the transit applied if it is errNone. retry says which errors keep the
// pending state for the caller to try again.
func (c *Coordinator) appendLocked(m *meta, coordEpoch int32, tr transit, retry func(int16) bool, done func(int16)) {
	cur, epoch, code := c.stateLocked(m.id)
	if code == errNone && (cur == nil || epoch != coordEpoch) {
		code = errNotCoordinator
	}
	if code != errNone {
		done(code)
		return
	}
	p := c.PartitionFor(m.id)
	_, committed, err := c.log.Append(p, encodeKey(m.id), encodeValue(tr))
	finish := func(err error) {
		code := errNone
		if err != nil {
			code = appendErr(err)
		}
		cur, epoch, scode := c.stateLocked(m.id)
		switch {
		case scode != errNone:
			code = scode
		case cur != m || epoch != coordEpoch:
			code = errNotCoordinator
		case code == errNone:
			if err := m.complete(tr); err != nil {
				c.logf("%v", err)
				code = errUnknownServer
			}
		case retry == nil || !retry(code):
			m.pending = nil
		}
		done(code)
	}
	if err != nil {
		finish(err)
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		timeout := time.Duration(tr.timeoutMs) * time.Millisecond
		ctx, cancel := context.WithTimeout(c.ctx, timeout)
		err := committed(ctx)
		cancel()
		c.mu.Lock()
		defer c.mu.Unlock()
		finish(err)
	}()
}

func (c *Coordinator) logf(format string, args ...any) {
	if c.onEvent != nil {
		c.onEvent(Event{API: APILog, Detail: fmt.Sprintf(format, args...), ProducerID: -1, ProducerEpoch: -1, CoordinatorEpoch: -1})
	}
}

func (c *Coordinator) requestContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, c.cfg.RequestTimeout)
}
