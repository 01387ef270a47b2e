package group

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"
)

// fakeClock runs timers synchronously inside Advance, in deadline order.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	for {
		sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
		var next *fakeTimer
		for i, t := range c.timers {
			if t.stopped {
				continue
			}
			if !t.at.After(target) {
				next = t
				c.timers = append(c.timers[:i:i], c.timers[i+1:]...)
			}
			break
		}
		if next == nil {
			break
		}
		next.stopped = true
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
		c.mu.Lock()
	}
	c.now = target
	c.mu.Unlock()
}

// memLog is a __consumer_offsets stand-in: every partition an in-memory
// list of batches. failNext makes the next local append fail; failCommit
// makes the next append's wait for the commit fail (the records stay in the
// log, uncommitted, as after a leader's failed delayed produce).
type memLog struct {
	mu         sync.Mutex
	parts      map[int32][]LoadedRecord
	next       map[int32]int64
	failNext   error
	failCommit error
	// block, if set, holds every wait for a commit until it is closed.
	block chan struct{}
}

func newMemLog() *memLog {
	return &memLog{parts: map[int32][]LoadedRecord{}, next: map[int32]int64{}}
}

func (l *memLog) Append(p int32, recs []Record) (int64, func(context.Context) error, error) {
	return l.append(p, recs, func(r *LoadedRecord) {})
}

func (l *memLog) AppendTxn(p int32, recs []Record, pid int64, _ int16) (int64, func(context.Context) error, error) {
	return l.append(p, recs, func(r *LoadedRecord) { r.ProducerID, r.Transactional = pid, true })
}

// marker appends a transaction marker of pid to partition p.
func (l *memLog) marker(p int32, pid int64, commit bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.parts[p] = append(l.parts[p], LoadedRecord{BatchOffset: l.next[p], ProducerID: pid, Transactional: true, Control: true, Commit: commit})
	l.next[p]++
}

func (l *memLog) append(p int32, recs []Record, mark func(*LoadedRecord)) (int64, func(context.Context) error, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.failNext; err != nil {
		l.failNext = nil
		return -1, nil, err
	}
	base := l.next[p]
	for _, r := range recs {
		lr := LoadedRecord{BatchOffset: base, Key: r.Key, Value: r.Value}
		mark(&lr)
		l.parts[p] = append(l.parts[p], lr)
	}
	l.next[p] = base + int64(len(recs))
	failCommit := l.failCommit
	l.failCommit = nil
	block := l.block
	return base, func(ctx context.Context) error {
		if block != nil {
			select {
			case <-block:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return failCommit
	}, nil
}

func (l *memLog) records(p int32) []LoadedRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]LoadedRecord(nil), l.parts[p]...)
}

const testPartitions = 4

type harness struct {
	t      *testing.T
	c      *Coordinator
	clk    *fakeClock
	log    *memLog
	events []Event
	ids    int
}

func newHarness(t *testing.T, log *memLog) *harness {
	t.Helper()
	if log == nil {
		log = newMemLog()
	}
	h := &harness{t: t, clk: newFakeClock(), log: log}
	h.c = New(Options{
		Config:  Config{NumPartitions: testPartitions},
		Log:     log,
		Clock:   h.clk,
		OnEvent: func(e Event) { h.events = append(h.events, e) },
		NewUUID: func() string { h.ids++; return fmt.Sprintf("uuid%d", h.ids) },
	})
	t.Cleanup(h.c.Close)
	return h
}

func (h *harness) loadAll() {
	h.t.Helper()
	for p := int32(0); p < testPartitions; p++ {
		if err := h.c.Load(p, h.log.records(p)); err != nil {
			h.t.Fatalf("load %d: %v", p, err)
		}
	}
}

// pendingResult holds a callback's answer once it arrives.
type pendingResult[T any] struct {
	v    T
	done bool
}

func (p *pendingResult[T]) get(t *testing.T) T {
	t.Helper()
	if !p.done {
		t.Fatalf("no answer yet")
	}
	return p.v
}

func (h *harness) join(r JoinRequest) *pendingResult[JoinResult] {
	out := &pendingResult[JoinResult]{}
	if r.SessionTimeoutMs == 0 {
		r.SessionTimeoutMs = 10_000
	}
	if r.RebalanceTimeoutMs == 0 {
		r.RebalanceTimeoutMs = 30_000
	}
	if r.ProtocolType == "" {
		r.ProtocolType = "consumer"
	}
	if r.Protocols == nil {
		r.Protocols = []Protocol{{Name: "range", Metadata: []byte("sub-" + r.ClientID)}}
	}
	h.c.run(func() {
		h.c.handleJoinGroup(r, func(j JoinResult) { out.v, out.done = j, true })
	})
	return out
}

// joinNew is a JoinGroup v4+ client's first join: MEMBER_ID_REQUIRED, then
// the same request with the id it was given.
func (h *harness) joinNew(group, client string) *pendingResult[JoinResult] {
	h.t.Helper()
	first := h.join(JoinRequest{Group: group, ClientID: client, RequireKnownMemberID: true})
	r := first.get(h.t)
	if r.Err != errMemberIDRequired {
		h.t.Fatalf("first join of %s: error %d, want MEMBER_ID_REQUIRED", client, r.Err)
	}
	return h.join(JoinRequest{Group: group, ClientID: client, MemberID: r.MemberID, RequireKnownMemberID: true})
}

func (h *harness) sync(r SyncRequest) *pendingResult[SyncResult] {
	out := &pendingResult[SyncResult]{}
	h.c.run(func() {
		h.c.handleSyncGroup(r, func(s SyncResult) { out.v, out.done = s, true })
	})
	return out
}

func (h *harness) heartbeat(group, member string, gen int32) int16 {
	var code int16
	h.c.run(func() { code = h.c.handleHeartbeat(HeartbeatRequest{Group: group, MemberID: member, Generation: gen}) })
	return code
}

func (h *harness) commit(group, member string, gen int32, offsets map[TopicPartition]int64) map[TopicPartition]int16 {
	h.t.Helper()
	oms := map[TopicPartition]OffsetAndMetadata{}
	for tp, o := range offsets {
		oms[tp] = OffsetAndMetadata{Offset: o, LeaderEpoch: -1, CommitTimestamp: h.c.nowMs(), ExpireTimestamp: -1}
	}
	var out map[TopicPartition]int16
	h.c.run(func() {
		h.c.handleCommitOffsets(CommitRequest{Group: group, MemberID: member, Generation: gen, Offsets: oms},
			func(m map[TopicPartition]int16) { out = m })
	})
	if out == nil {
		h.t.Fatalf("commit not answered")
	}
	return out
}

func (h *harness) fetch(group string, tps []TopicPartition) (int16, []FetchedOffset) {
	var code int16
	var out []FetchedOffset
	h.c.run(func() { code, out = h.c.handleFetchOffsets(group, false, tps) })
	return code, out
}

func (h *harness) group(id string) *groupMeta {
	h.t.Helper()
	var g *groupMeta
	h.c.run(func() { g = h.c.groups[id] })
	if g == nil {
		h.t.Fatalf("no group %q", id)
	}
	if len(g.badTransitions) > 0 {
		h.t.Fatalf("group %q made invalid transitions: %v", id, g.badTransitions)
	}
	return g
}

// stableGroup brings n members of group through join and sync and returns
// their member ids (leader first) and the generation.
func (h *harness) stableGroup(group string, n int) ([]string, int32) {
	h.t.Helper()
	var joins []*pendingResult[JoinResult]
	for i := 0; i < n; i++ {
		joins = append(joins, h.joinNew(group, fmt.Sprintf("c%d", i)))
	}
	for i := 0; i < 5 && !joins[0].done; i++ {
		h.clk.Advance(3 * time.Second)
	}
	var ids []string
	var leader string
	gen := joins[0].get(h.t).Generation
	for _, j := range joins {
		r := j.get(h.t)
		if r.Err != 0 {
			h.t.Fatalf("join: error %d", r.Err)
		}
		leader = r.LeaderID
		if r.MemberID == leader {
			ids = append([]string{r.MemberID}, ids...)
		} else {
			ids = append(ids, r.MemberID)
		}
	}
	assign := map[string][]byte{}
	for _, id := range ids {
		assign[id] = []byte("a-" + id)
	}
	var syncs []*pendingResult[SyncResult]
	for _, id := range ids[1:] {
		syncs = append(syncs, h.sync(SyncRequest{Group: group, Generation: gen, MemberID: id}))
	}
	syncs = append(syncs, h.sync(SyncRequest{Group: group, Generation: gen, MemberID: ids[0], Assignments: assign}))
	for _, s := range syncs {
		if r := s.get(h.t); r.Err != 0 {
			h.t.Fatalf("sync: error %d", r.Err)
		}
	}
	return ids, gen
}
