package checkers

import "slices"

// KnownLostUnflushedElected: acknowledged records lost after
// crash-lose-unflushed cut one broker's log, and a controller then elected
// that broker from an ISR that still listed it, ahead of ISR members that
// kept the records. The controller cannot tell a process that lost its
// page cache: a SIGKILLed broker stays registered until its ZooKeeper
// session expires, and stays in the ISR until a controller handles that
// expiry or its new registration (KafkaController.onBrokerFailure, whose
// OfflineReplica step removes it). An election before that
// (PartitionLeaderElectionAlgorithms.offlinePartitionLeaderElection) takes
// the first replica of the assignment that is live and in the ISR, whatever
// its log holds; when the crashed broker comes first, its new process
// (Partition at leader epoch -1) accepts the epoch and leads with the cut
// log, its epoch cache starting after the lost records, so
// LeaderEpochFileCache.endOffsetFor answers the new epoch's start offset
// for every older epoch and the members that kept the records truncate to
// it. An exposed broker elected behind an ISR member that kept them is not
// this anomaly: the assignment put the keeper first.
const KnownLostUnflushedElected = "lost-unflushed-elected"

// electedLoss returns the loss of leadership l when it was an election
// after a crash of its broker (a crash after after, whose cut lies below
// offset when offset is known, and l's epoch above every epoch led before
// that crash, and its broker's first leadership since) from an ISR that
// still listed the broker, while it was exposed, and the broker precedes in the partition's assignment every ISR
// member not exposed then. It returns nil otherwise, and when the
// assignment is unknown.
func (p *unflushedPartition) electedLoss(l unflushedLeader, after, offset int64) *unflushedLoss {
	if len(l.isr) < 2 || !slices.Contains(l.isr, l.node) {
		return nil
	}
	exposed := p.exposedAt(l.time, &l)
	xp := p.exposureAfter(l.node, l, after)
	if xp == nil {
		return nil
	}
	x := *xp
	if !p.firstSign(l, x.crash.start.Time) {
		return nil
	}
	if cut := x.crash.cuts[p.tp]; offset >= 0 && (cut == nil || offset < cut.To || offset >= cut.From) {
		return nil
	}
	for _, o := range slices.Concat(p.leaders, p.appends) {
		if o.time < x.crash.start.Time && o.epoch >= l.epoch {
			return nil // not an election since the crash
		}
		if o.node == l.node && o.time >= x.crash.start.Time && o.time < l.time && o.epoch < l.epoch {
			return nil // it led before since the crash: that leadership lost the records
		}
	}
	replicas := p.assignment(l.time)
	pos := slices.Index(replicas, l.node)
	if pos < 0 {
		return nil
	}
	var kept []int32
	for _, m := range l.isr {
		if slices.ContainsFunc(exposed, func(x unflushedExposure) bool { return x.crash.node == m }) {
			continue
		}
		if j := slices.Index(replicas, m); j < pos {
			return nil // the assignment put a keeper first
		}
		kept = append(kept, m)
	}
	if len(kept) == 0 {
		return nil // every member exposed: lost-unflushed-isr
	}
	return &unflushedLoss{in: []unflushedExposure{x}, elected: l, ahead: true, kept: kept, replicas: replicas}
}

// assignment returns the partition's replicas as the latest state logged
// at or before t lists them (a controller's write carries them, the
// state znode itself does not), nil when none does.
func (p *unflushedPartition) assignment(t int64) []int32 {
	var out []int32
	for _, s := range p.states {
		if s.time <= t && len(s.Replicas) > 0 {
			out = s.Replicas
		}
	}
	return out
}
