package node

import "sync"

// partitionLoads is what the group and the transaction coordinators share
// of following their internal topic's leadership (GroupCoordinator and
// TransactionCoordinator's onElection and onResignation): a partition this
// broker wins starts loading, once while it keeps leading it (Kafka 2.6.3's
// Partition.makeLeader reports a broker that already leads as no new
// leader, at a newer epoch or not), and the loads run one at a time in the
// order won, as each coordinator's single scheduler thread runs them; a
// partition given up is unloaded.
type partitionLoads struct {
	// begin marks p loading (requests answer COORDINATOR_LOAD_IN_PROGRESS),
	// load reads it, unload forgets it; epoch is the leader epoch won at.
	begin, load func(p, epoch int32)
	unload      func(p int32)

	mu    sync.Mutex
	led   map[int32]bool
	queue chan partitionLoad
	done  chan struct{}
}

type partitionLoad struct{ p, epoch int32 }

func newPartitionLoads(begin, load func(p, epoch int32), unload func(p int32)) *partitionLoads {
	l := &partitionLoads{begin: begin, load: load, unload: unload, led: map[int32]bool{},
		queue: make(chan partitionLoad, 1024), done: make(chan struct{})}
	go l.run()
	return l
}

// elected: this broker leads p at epoch now.
func (l *partitionLoads) elected(p, epoch int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.led[p] {
		return
	}
	l.led[p] = true
	l.begin(p, epoch)
	select {
	case l.queue <- partitionLoad{p, epoch}:
	default:
		// A thousand loads queued: the loader is stuck; load here rather
		// than leave the partition loading for ever.
		go l.load(p, epoch)
	}
}

// resigned: this broker follows p now, or StopReplica deleted it.
func (l *partitionLoads) resigned(p int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.led[p] {
		return
	}
	delete(l.led, p)
	l.unload(p)
}

func (l *partitionLoads) run() {
	defer close(l.done)
	for q := range l.queue {
		l.load(q.p, q.epoch)
	}
}

// close stops the loader once the queued loads ran.
func (l *partitionLoads) close() {
	close(l.queue)
	<-l.done
}
