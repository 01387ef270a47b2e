package group

// Transactional offset commits (KIP-98): a TxnOffsetCommit writes its
// offsets to __consumer_offsets as a transactional batch of the producer,
// and they stay pending, invisible to OffsetFetch, until the transaction's
// marker is written to that partition: a commit marker makes them the
// group's committed offsets, an abort marker drops them.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnCommitRequest is a TxnOffsetCommit after KafkaApis has resolved
// timestamps and dropped unknown partitions. Generation is -1 and MemberID
// "" when the request (before v3) carried none.
type TxnCommitRequest struct {
	Group         string
	ProducerID    int64
	ProducerEpoch int16
	MemberID      string
	InstanceID    *string
	Generation    int32
	Offsets       map[TopicPartition]OffsetAndMetadata
}

// producer is the producer id and epoch of a transactional offset commit;
// nil for a consumer's OffsetCommit.
type producer struct {
	id    int64
	epoch int16
}

// handleTxnCommitOffsets is GroupCoordinator.handleTxnCommitOffsets and
// doTxnCommitOffsets: unlike OffsetCommit, the group's state does not
// matter, and the member and generation are checked only when the request
// carries them.
func (c *Coordinator) handleTxnCommitOffsets(r TxnCommitRequest, cb func(map[TopicPartition]int16)) {
	all := answerAll(r.Offsets, cb)
	if code := c.validateGroupStatus(r.Group, apiTxnCommit); code != errNone {
		all(code)
		return
	}
	g := c.groups[r.Group]
	if g == nil {
		g = newGroup(r.Group, Empty, c.nowMs())
		c.groups[r.Group] = g
	}
	switch {
	case g.is(Dead):
		all(errCoordinatorNotAvailable)
	case g.isStaticMemberFenced(r.MemberID, r.InstanceID):
		all(errFencedInstanceID)
	case r.MemberID != "" && !g.has(r.MemberID):
		all(errUnknownMemberID)
	case r.Generation >= 0 && r.Generation != g.generation:
		all(errIllegalGeneration)
	default:
		c.storeOffsetsAs(g, r.Offsets, &producer{r.ProducerID, r.ProducerEpoch}, cb)
	}
}

// addProducerGroup, removeProducerGroup and removeGroupFromAllProducers
// keep openGroupsForProducer: the groups with offsets pending in a
// producer's transaction, so a marker finds them.
func (c *Coordinator) addProducerGroup(pid int64, group string) {
	if c.producerGroups[pid] == nil {
		c.producerGroups[pid] = map[string]bool{}
	}
	c.producerGroups[pid][group] = true
}

func (c *Coordinator) removeProducerGroup(pid int64, group string) {
	delete(c.producerGroups[pid], group)
	if len(c.producerGroups[pid]) == 0 {
		delete(c.producerGroups, pid)
	}
}

func (c *Coordinator) removeGroupFromAllProducers(group string) {
	for pid := range c.producerGroups {
		c.removeProducerGroup(pid, group)
	}
}

// HandleTxnCompletion is GroupMetadataManager.handleTxnCompletion, called
// once a commit or abort marker of producer pid has been written and
// committed to the listed __consumer_offsets partitions: the producer's
// pending offsets of every group of those partitions become committed
// offsets (commit) or are dropped (abort). A group this broker no longer
// has is left to the broker that loads it from the log.
func (c *Coordinator) HandleTxnCompletion(pid int64, partitions []int32, commit bool) {
	c.run(func() {
		in := map[int32]bool{}
		for _, p := range partitions {
			in[p] = true
		}
		var ids []string
		for id := range c.producerGroups[pid] {
			if in[c.PartitionFor(id)] {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		for _, id := range ids {
			g := c.groups[id]
			if g == nil || g.is(Dead) {
				continue
			}
			g.completePendingTxnOffsetCommit(pid, commit)
			c.removeProducerGroup(pid, id)
			c.emit(Event{API: APITxnCompletion, Group: id, GenerationCarried: -1, ProducerID: pid, Commit: commit})
		}
	})
}

// prepareTxnOffsetCommit is GroupMetadata.prepareTxnOffsetCommit: the
// offsets are pending, not yet in the log (batch offset -1).
func (g *groupMeta) prepareTxnOffsetCommit(pid int64, offsets map[TopicPartition]OffsetAndMetadata) {
	if g.pendingTxn[pid] == nil {
		g.pendingTxn[pid] = map[TopicPartition]commitRecord{}
	}
	for tp, om := range offsets {
		g.pendingTxn[pid][tp] = commitRecord{batchOffset: -1, om: om}
	}
}

// failPendingTxnOffsetCommit is GroupMetadata.failPendingTxnOffsetCommit:
// the record was not written, so nothing is pending for tp.
func (g *groupMeta) failPendingTxnOffsetCommit(pid int64, tp TopicPartition) {
	pending, ok := g.pendingTxn[pid]
	if !ok {
		return
	}
	delete(pending, tp)
	if len(pending) == 0 {
		delete(g.pendingTxn, pid)
	}
}

// onTxnOffsetCommitAppend is GroupMetadata.onTxnOffsetCommitAppend: the
// pending offset learns the batch that holds it, unless a later commit of
// the same producer replaced it meanwhile.
func (g *groupMeta) onTxnOffsetCommitAppend(pid int64, tp TopicPartition, cr commitRecord) {
	pending, ok := g.pendingTxn[pid]
	if !ok {
		return
	}
	if cur, ok := pending[tp]; ok && cur.om == cr.om {
		pending[tp] = cr
	}
}

// completePendingTxnOffsetCommit is
// GroupMetadata.completePendingTxnOffsetCommit. A committed offset
// replaces the group's only if its batch is newer in the log than the
// current one's; a pending offset whose record was never appended is
// skipped (Kafka throws IllegalStateException there).
func (g *groupMeta) completePendingTxnOffsetCommit(pid int64, commit bool) {
	pending := g.pendingTxn[pid]
	delete(g.pendingTxn, pid)
	if !commit {
		return
	}
	for tp, cr := range pending {
		if cr.batchOffset < 0 {
			continue
		}
		if cur, ok := g.offsets[tp]; !ok || cur.batchOffset < cr.batchOffset {
			g.offsets[tp] = cr
		}
	}
}

// hasPendingOffsetCommits is
// GroupMetadata.hasPendingOffsetCommitsForTopicPartition.
func (g *groupMeta) hasPendingOffsetCommits(tp TopicPartition) bool {
	if _, ok := g.pendingCommits[tp]; ok {
		return true
	}
	for _, pending := range g.pendingTxn {
		if _, ok := pending[tp]; ok {
			return true
		}
	}
	return false
}

// TxnOffsetCommit is KafkaApis.handleTxnOffsetCommitRequest (v0-3, no
// authorizer): partitions the metadata cache does not know answer
// UNKNOWN_TOPIC_OR_PARTITION, the rest go to the coordinator; before v2
// COORDINATOR_LOAD_IN_PROGRESS is answered as COORDINATOR_NOT_AVAILABLE
// (clients before 2.0 did not expect it).
func (h *Handlers) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, error) {
	now := h.C.nowMs()
	r := TxnCommitRequest{Group: req.Group, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Generation: -1,
		Offsets: map[TopicPartition]OffsetAndMetadata{}}
	if req.Version >= 3 {
		r.MemberID, r.InstanceID, r.Generation = req.MemberID, req.InstanceID, req.Generation
	}
	errs := map[TopicPartition]int16{}
	asked := map[TopicPartition]int64{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p.Partition}
			asked[tp] = p.Offset
			if h.Cluster != nil && !h.Cluster.PartitionExists(t.Topic, p.Partition) {
				errs[tp] = errUnknownTopicOrPartition
				continue
			}
			om := OffsetAndMetadata{Offset: p.Offset, LeaderEpoch: -1, Metadata: deref(p.Metadata), CommitTimestamp: now, ExpireTimestamp: -1}
			if req.Version >= 2 && p.LeaderEpoch >= 0 {
				om.LeaderEpoch = p.LeaderEpoch
			}
			r.Offsets[tp] = om
		}
	}
	ch := make(chan map[TopicPartition]int16, 1)
	finish := func(status map[TopicPartition]int16) {
		for tp, code := range status {
			if req.Version < 2 && code == errCoordinatorLoadInProgress {
				code = errCoordinatorNotAvailable
			}
			errs[tp] = code
		}
		ev := Event{API: APITxnOffsetCommit, Version: req.Version, Group: req.Group, Member: r.MemberID, InstanceID: r.InstanceID,
			GenerationCarried: r.Generation, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, TransactionalID: req.TransactionalID}
		for _, tp := range sortedTPs(errs) {
			ev.Offsets = append(ev.Offsets, EventOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: asked[tp], Error: errs[tp]})
		}
		h.C.emit(ev)
		ch <- errs
	}
	h.C.run(func() {
		if len(r.Offsets) == 0 {
			finish(nil)
			return
		}
		h.C.handleTxnCommitOffsets(r, finish)
	})
	status, err := wait(ctx, ch)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = status[TopicPartition{t.Topic, p.Partition}]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// Event APIs of transactional offset commits.
const (
	// APITxnOffsetCommit is a TxnOffsetCommit answered.
	APITxnOffsetCommit = "TxnOffsetCommit"
	// APITxnCompletion is a marker applied to a group's pending
	// transactional offsets (not a request).
	APITxnCompletion = "TxnOffsetCompletion"
)
