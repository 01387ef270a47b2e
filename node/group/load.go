package group

import (
	"errors"
	"fmt"
)

// BeginLoad is the synchronous half of GroupCoordinator.onElection: this
// broker now leads __consumer_offsets partition p, and until FinishLoad its
// groups answer COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) BeginLoad(p int32) {
	c.run(func() { c.loading[p] = true })
}

// FinishLoad is GroupMetadataManager.doLoadGroupsAndOffsets over the
// partition's records, oldest first, read up to the log end. As in 2.6.3 the
// partition becomes owned even when loading fails (the error is returned
// for the log); a group already cached (a re-election while owned) is kept.
// A partition unloaded since BeginLoad stays unloaded: Kafka's single
// loader thread would run the unload after the load.
func (c *Coordinator) FinishLoad(p int32, records []LoadedRecord) error {
	var err error
	c.run(func() {
		if !c.loading[p] {
			return
		}
		err = c.loadRecords(p, records)
		delete(c.loading, p)
		c.owned[p] = true
		code := errNone
		if err != nil {
			code = errUnknownServer
		}
		var ids []string
		for id := range c.groups {
			if c.PartitionFor(id) == p {
				ids = append(ids, id)
			}
		}
		c.emitPartition("LoadPartition", p, ids, code)
	})
	return err
}

// Load is BeginLoad followed by FinishLoad.
func (c *Coordinator) Load(p int32, records []LoadedRecord) error {
	c.BeginLoad(p)
	return c.FinishLoad(p, records)
}

type groupTP struct {
	group string
	tp    TopicPartition
}

func (c *Coordinator) loadRecords(p int32, records []LoadedRecord) error {
	offsets := map[groupTP]commitRecord{}
	// pending are the offsets of transactions not yet decided in the log,
	// by producer id (doLoadGroupsAndOffsets' pendingOffsets).
	pending := map[int64]map[groupTP]commitRecord{}
	groups := map[string]GroupRecord{}
	removed := map[string]bool{}
	for i, r := range records {
		if r.Control {
			if r.Commit {
				for gtp, cr := range pending[r.ProducerID] {
					if cur, ok := offsets[gtp]; !ok || cur.batchOffset < cr.batchOffset {
						offsets[gtp] = cr
					}
				}
			}
			delete(pending, r.ProducerID)
			continue
		}
		k, err := ReadKey(r.Key)
		if err != nil {
			return fmt.Errorf("load __consumer_offsets-%d record %d: %w", p, i, err)
		}
		if k.IsOffset {
			gtp := groupTP{k.Group, k.TP}
			into := offsets
			if r.Transactional {
				if pending[r.ProducerID] == nil {
					pending[r.ProducerID] = map[groupTP]commitRecord{}
				}
				into = pending[r.ProducerID]
			}
			if r.Value == nil {
				delete(into, gtp)
				continue
			}
			om, err := ReadOffsetValue(r.Value)
			if err != nil {
				return fmt.Errorf("load __consumer_offsets-%d record %d: %w", p, i, err)
			}
			into[gtp] = commitRecord{batchOffset: r.BatchOffset, om: om}
			continue
		}
		if r.Value == nil {
			delete(groups, k.Group)
			removed[k.Group] = true
			continue
		}
		g, err := ReadGroupValue(r.Value)
		if err != nil {
			return fmt.Errorf("load __consumer_offsets-%d record %d: %w", p, i, err)
		}
		delete(removed, k.Group)
		groups[k.Group] = g
	}
	byGroup := map[string]map[TopicPartition]commitRecord{}
	for gtp, cr := range offsets {
		if byGroup[gtp.group] == nil {
			byGroup[gtp.group] = map[TopicPartition]commitRecord{}
		}
		byGroup[gtp.group][gtp.tp] = cr
	}
	pendingByGroup := map[string]map[int64]map[TopicPartition]commitRecord{}
	for pid, tps := range pending {
		for gtp, cr := range tps {
			c.addProducerGroup(pid, gtp.group)
			if pendingByGroup[gtp.group] == nil {
				pendingByGroup[gtp.group] = map[int64]map[TopicPartition]commitRecord{}
			}
			if pendingByGroup[gtp.group][pid] == nil {
				pendingByGroup[gtp.group][pid] = map[TopicPartition]commitRecord{}
			}
			pendingByGroup[gtp.group][pid][gtp.tp] = cr
		}
	}
	initialize := func(g *groupMeta) {
		for tp, cr := range byGroup[g.id] {
			g.offsets[tp] = cr
		}
		for pid, tps := range pendingByGroup[g.id] {
			g.pendingTxn[pid] = tps
		}
		c.installLoaded(g)
	}
	for id, rec := range groups {
		initialize(c.groupFromRecord(id, rec))
	}
	// Offsets without group metadata: a group using Kafka only for offset
	// storage, or only a producer's transactions.
	offsetOnly := map[string]bool{}
	for id := range byGroup {
		offsetOnly[id] = true
	}
	for id := range pendingByGroup {
		offsetOnly[id] = true
	}
	for id := range offsetOnly {
		if _, ok := groups[id]; !ok {
			initialize(newGroup(id, Empty, c.nowMs()))
		}
	}
	var errs []error
	for id := range removed {
		if _, cached := c.groups[id]; cached && byGroup[id] == nil {
			errs = append(errs, fmt.Errorf("load __consumer_offsets-%d: unexpected unload of active group %q", p, id))
		}
	}
	return errors.Join(errs...)
}

// groupFromRecord is GroupMetadata.loadGroup over a decoded value.
func (c *Coordinator) groupFromRecord(id string, rec GroupRecord) *groupMeta {
	state := Stable
	if len(rec.Members) == 0 {
		state = Empty
	}
	g := newGroup(id, state, rec.CurrentStateTimestamp)
	g.generation = rec.Generation
	if rec.ProtocolType != "" {
		pt := rec.ProtocolType
		g.protocolType = &pt
	}
	g.protocolName = rec.Protocol
	g.leader = rec.Leader
	for _, mr := range rec.Members {
		m := &member{id: mr.MemberID, instanceID: mr.InstanceID, clientID: mr.ClientID, clientHost: mr.ClientHost,
			rebalanceTimeout: mr.RebalanceTimeout, sessionTimeout: mr.SessionTimeout, protocolType: rec.ProtocolType,
			protocols: []Protocol{{Name: deref(rec.Protocol), Metadata: mr.Subscription}}, assignment: mr.Assignment}
		// readGroupMessageValue wraps the v3 field in Some(...) even when it
		// is null, so every member of a v3 value loads as static.
		m.isStatic = true
		g.add(m, nil)
		g.addStatic(m.instanceID, m.id)
	}
	return g
}

// installLoaded is GroupMetadataManager.loadGroup followed by
// GroupCoordinator.onGroupLoaded.
func (c *Coordinator) installLoaded(g *groupMeta) {
	if _, ok := c.groups[g.id]; ok {
		return
	}
	c.groups[g.id] = g
	if len(g.members) > c.cfg.MaxGroupSize {
		c.prepareRebalance(g)
	}
	for _, m := range g.memberList() {
		c.completeAndScheduleNextHeartbeatExpiration(g, m)
	}
}

// Unload is GroupCoordinator.onResignation: this broker no longer leads p.
// Its groups turn Dead, parked JoinGroup and SyncGroup requests answer
// NOT_COORDINATOR, and later requests for them answer NOT_COORDINATOR.
func (c *Coordinator) Unload(p int32) {
	c.run(func() {
		delete(c.owned, p)
		delete(c.loading, p)
		var ids []string
		for id, g := range c.groups {
			if c.PartitionFor(id) != p {
				continue
			}
			c.onGroupUnloaded(g)
			delete(c.groups, id)
			c.removeGroupFromAllProducers(id)
			ids = append(ids, id)
		}
		c.emitPartition("UnloadPartition", p, ids, errNone)
	})
}

// onGroupUnloaded is GroupCoordinator.onGroupUnloaded.
func (c *Coordinator) onGroupUnloaded(g *groupMeta) {
	prev := g.state
	g.transition(Dead, c.nowMs())
	switch prev {
	case PreparingRebalance:
		for _, m := range g.memberList() {
			g.maybeInvokeJoin(m, joinErr(m.id, errNotCoordinator))
		}
	case Stable, CompletingRebalance:
		for _, m := range g.memberList() {
			g.maybeInvokeSync(m, SyncResult{Err: errNotCoordinator})
		}
	}
	// A Dead group's delayed operations all complete without effect.
	g.join = nil
	for k := range c.timers {
		if k.group == g.id {
			c.cancelTimer(k)
		}
	}
}
