package controller

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
)

// ---- request batches ----------------------------------------------------------

// batch is ControllerBrokerRequestBatch: requests per broker, sent together
// with this controller's epoch and each broker's cached broker epoch.
type batch struct {
	c     *Controller
	lai   map[int32]map[history.TopicPartition]bool // broker → partitions (isNew)
	stop  map[int32][]kmsg.StopReplicaRequestTopic
	um    map[int32][]history.TopicPartition
	umAll map[int32]bool
}

func (c *Controller) newBatch() *batch {
	return &batch{c: c, lai: map[int32]map[history.TopicPartition]bool{}, stop: map[int32][]kmsg.StopReplicaRequestTopic{},
		um: map[int32][]history.TopicPartition{}, umAll: map[int32]bool{}}
}

func (b *batch) leaderAndIsr(brokers []int32, tp history.TopicPartition, isNew bool) {
	for _, id := range brokers {
		if b.lai[id] == nil {
			b.lai[id] = map[history.TopicPartition]bool{}
		}
		b.lai[id][tp] = isNew
	}
}

func (b *batch) stopReplica(id int32, tp history.TopicPartition, del bool, leaderEpoch int32) {
	t := kmsg.NewStopReplicaRequestTopic()
	t.Topic = tp.Topic
	ps := kmsg.NewStopReplicaRequestTopicPartitionState()
	ps.Partition, ps.LeaderEpoch, ps.Delete = tp.Partition, leaderEpoch, del
	t.PartitionStates = append(t.PartitionStates, ps)
	b.stop[id] = append(b.stop[id], t)
}

// updateMetadata adds partitions (nil: all) for brokers.
func (b *batch) updateMetadata(brokers []int32, tps []history.TopicPartition) {
	for _, id := range brokers {
		if tps == nil {
			b.umAll[id] = true
		}
		b.um[id] = append(b.um[id], tps...)
	}
}

func (c *Controller) sendUpdateMetadata(brokers []int32, tps []history.TopicPartition) {
	b := c.newBatch()
	b.updateMetadata(brokers, tps)
	b.send()
}

func (b *batch) brokerEpoch(id int32) int64 {
	c := b.c
	if c.cfg.Bugs.On(config.BugKafka7235) {
		return -1 // no broker epoch before KIP-380
	}
	if bi, ok := c.ctx.live[id]; ok {
		return bi.Epoch
	}
	return -1
}

// meantEpoch is the broker epoch (czxid) the controller holds for id: the
// process a request is meant for, logged whether or not the request
// carries it.
func (b *batch) meantEpoch(id int32) int64 {
	if bi, ok := b.c.ctx.live[id]; ok {
		return bi.Epoch
	}
	return 0
}

func (b *batch) send() {
	c := b.c
	liveLeaders := func() []kmsg.LeaderAndISRRequestLiveLeader {
		var out []kmsg.LeaderAndISRRequestLiveLeader
		for _, id := range brokerIDs(c.ctx.live) {
			bi := c.ctx.live[id]
			l := kmsg.NewLeaderAndISRRequestLiveLeader()
			l.BrokerID, l.Host, l.Port = bi.ID, bi.Host, bi.Port
			out = append(out, l)
		}
		return out
	}
	for _, id := range sortedKeys(b.lai) {
		req := kmsg.NewPtrLeaderAndISRRequest()
		req.SetVersion(4)
		req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = c.cfg.BrokerID, c.epoch, b.brokerEpoch(id)
		tps := make([]history.TopicPartition, 0, len(b.lai[id]))
		for tp := range b.lai[id] {
			tps = append(tps, tp)
		}
		sortTPs(tps)
		req.TopicStates = byTopic(tps, c.ctx.state, kmsg.NewLeaderAndISRRequestTopicState, func(t *kmsg.LeaderAndISRRequestTopicState, tp history.TopicPartition, ps *partState) {
			t.Topic = tp.Topic
			p := kmsg.NewLeaderAndISRRequestTopicPartition()
			p.Partition, p.ControllerEpoch, p.Leader, p.LeaderEpoch = tp.Partition, ps.st.ControllerEpoch, ps.st.Leader, ps.st.LeaderEpoch
			p.ISR, p.ZKVersion, p.Replicas, p.IsNew = slices.Clone(ps.st.ISR), ps.ver, slices.Clone(c.ctx.assign[tp]), b.lai[id][tp]
			t.PartitionStates = append(t.PartitionStates, p)
		})
		req.LiveLeaders = liveLeaders()
		if len(req.TopicStates) > 0 {
			c.chans.send(id, req, b.meantEpoch(id))
		}
	}
	for _, id := range sortedKeys(b.stop) {
		req := kmsg.NewPtrStopReplicaRequest()
		req.SetVersion(3)
		req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = c.cfg.BrokerID, c.epoch, b.brokerEpoch(id)
		req.Topics = b.stop[id]
		c.chans.send(id, req, b.meantEpoch(id))
	}
	for _, id := range sortedKeys(b.um) {
		req := kmsg.NewPtrUpdateMetadataRequest()
		req.SetVersion(6)
		req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = c.cfg.BrokerID, c.epoch, b.brokerEpoch(id)
		tps := b.um[id]
		if b.umAll[id] {
			tps = c.ctx.sortedTPs()
		}
		req.TopicStates = byTopic(tps, c.ctx.state, kmsg.NewUpdateMetadataRequestTopicState, func(t *kmsg.UpdateMetadataRequestTopicState, tp history.TopicPartition, ps *partState) {
			t.Topic = tp.Topic
			p := kmsg.NewUpdateMetadataRequestTopicPartition()
			p.Topic, p.Partition, p.ControllerEpoch, p.Leader, p.LeaderEpoch = tp.Topic, tp.Partition, ps.st.ControllerEpoch, ps.st.Leader, ps.st.LeaderEpoch
			if c.ctx.queuedTP(tp) {
				// addUpdateMetadataRequestForBrokers (beingDeleted):
				// LeaderAndIsr.LeaderDuringDelete tells the broker to drop
				// the partition from its metadata cache.
				p.Leader = leaderDuringDelete
			}
			p.ISR, p.ZKVersion, p.Replicas = slices.Clone(ps.st.ISR), ps.ver, slices.Clone(c.ctx.assign[tp])
			for _, r := range c.ctx.assign[tp] {
				if _, ok := c.ctx.live[r]; !ok {
					p.OfflineReplicas = append(p.OfflineReplicas, r)
				}
			}
			t.PartitionStates = append(t.PartitionStates, p)
		})
		for _, lid := range brokerIDs(c.ctx.live) {
			bi := c.ctx.live[lid]
			lb := kmsg.NewUpdateMetadataRequestLiveBroker()
			lb.ID = bi.ID
			ep := kmsg.NewUpdateMetadataRequestLiveBrokerEndpoint()
			ep.Host, ep.Port, ep.ListenerName, ep.SecurityProtocol = bi.Host, bi.Port, "PLAINTEXT", 0
			lb.Endpoints = append(lb.Endpoints, ep)
			req.LiveBrokers = append(req.LiveBrokers, lb)
		}
		c.chans.send(id, req, b.meantEpoch(id))
	}
}

func sortedKeys[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// onResponse is called by send threads of the queues made in controller
// generation gen. Responses are logged; a StopReplica that deleted
// partitions becomes an event for the deletion (Kafka's response callback),
// which the event loop drops if the controller moved on since.
func (c *Controller) onResponse(gen int, broker int32, req kmsg.Request, resp kmsg.Response) {
	var code int16
	switch r := resp.(type) {
	case *kmsg.LeaderAndISRResponse:
		code = r.ErrorCode
	case *kmsg.StopReplicaResponse:
		code = r.ErrorCode
		if sr, ok := req.(*kmsg.StopReplicaRequest); ok {
			if ev := deletionResponse(gen, broker, sr, r); ev != nil {
				c.events.push(ev)
			}
		}
	case *kmsg.UpdateMetadataResponse:
		code = r.ErrorCode
	}
	if code != 0 {
		c.log.Printf("broker %d answered %s with error %d", broker, kmsg.NameForKey(req.Key()), code)
	}
}

// Close stops watch goroutines and send threads; call after Run returned.
func (c *Controller) Close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	if c.chans != nil {
		c.chans.shutdown()
	}
}

// byTopic builds a request's per-topic states from tps: one T per topic, in
// the order topics first appear (made by open), holding the partitions that
// have a state (add appends one, and names the topic). Partitions without a
// state are left out.
func byTopic[T any](tps []history.TopicPartition, states map[history.TopicPartition]*partState,
	open func() T, add func(t *T, tp history.TopicPartition, ps *partState)) []T {
	var out []T
	index := map[string]int{}
	for _, tp := range tps {
		ps := states[tp]
		if ps == nil {
			continue
		}
		i, ok := index[tp.Topic]
		if !ok {
			i = len(out)
			index[tp.Topic] = i
			out = append(out, open())
		}
		add(&out[i], tp, ps)
	}
	return out
}
