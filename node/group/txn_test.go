package group

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func (h *harness) txnCommit(r TxnCommitRequest, offsets map[TopicPartition]int64) map[TopicPartition]int16 {
	h.t.Helper()
	r.Offsets = map[TopicPartition]OffsetAndMetadata{}
	for tp, o := range offsets {
		r.Offsets[tp] = OffsetAndMetadata{Offset: o, LeaderEpoch: -1, CommitTimestamp: h.c.nowMs(), ExpireTimestamp: -1}
	}
	if r.MemberID == "" && r.Generation == 0 {
		r.Generation = -1
	}
	var out map[TopicPartition]int16
	h.c.run(func() { h.c.handleTxnCommitOffsets(r, func(m map[TopicPartition]int16) { out = m }) })
	if out == nil {
		h.t.Fatalf("TxnOffsetCommit not answered")
	}
	return out
}

func (h *harness) fetchOne(group string, tp TopicPartition, stable bool) FetchedOffset {
	h.t.Helper()
	var code int16
	var out []FetchedOffset
	h.c.run(func() { code, out = h.c.handleFetchOffsets(group, stable, []TopicPartition{tp}) })
	if code != 0 || len(out) != 1 {
		h.t.Fatalf("fetch %s %v: code %d, %v", group, tp, code, out)
	}
	return out[0]
}

func wantCodes(t *testing.T, what string, got map[TopicPartition]int16, want int16) {
	t.Helper()
	for tp, c := range got {
		if c != want {
			t.Errorf("%s: %v answered %d, want %d", what, tp, c, want)
		}
	}
}

// A transactional commit is invisible until its marker: OffsetFetch keeps
// the old offset (and answers UNSTABLE_OFFSET_COMMIT when asked for stable
// offsets), a commit marker applies it, an abort marker drops it.
func TestTxnOffsetCommitPendingUntilMarker(t *testing.T) {
	tp := TopicPartition{"t", 0}
	for _, commit := range []bool{true, false} {
		h := newHarness(t, nil)
		h.loadAll()
		wantCodes(t, "plain commit", h.commit("g", "", -1, map[TopicPartition]int64{tp: 5}), 0)
		wantCodes(t, "txn commit", h.txnCommit(TxnCommitRequest{Group: "g", ProducerID: 7, ProducerEpoch: 1}, map[TopicPartition]int64{tp: 9}), 0)
		if f := h.fetchOne("g", tp, false); f.Offset != 5 {
			t.Fatalf("before the marker: offset %d, want 5", f.Offset)
		}
		if f := h.fetchOne("g", tp, true); f.Err != errUnstableOffsetCommit {
			t.Fatalf("stable fetch before the marker: error %d, want UNSTABLE_OFFSET_COMMIT", f.Err)
		}
		// A marker for another partition or producer changes nothing.
		h.c.HandleTxnCompletion(7, []int32{(h.c.PartitionFor("g") + 1) % testPartitions}, commit)
		h.c.HandleTxnCompletion(8, []int32{h.c.PartitionFor("g")}, commit)
		if f := h.fetchOne("g", tp, true); f.Err != errUnstableOffsetCommit {
			t.Fatalf("after unrelated markers: error %d, want UNSTABLE_OFFSET_COMMIT", f.Err)
		}
		h.c.HandleTxnCompletion(7, []int32{h.c.PartitionFor("g")}, commit)
		want := int64(5)
		if commit {
			want = 9
		}
		if f := h.fetchOne("g", tp, true); f.Err != 0 || f.Offset != want {
			t.Fatalf("commit=%v: offset %d error %d, want %d", commit, f.Offset, f.Err, want)
		}
		last := h.events[len(h.events)-1]
		if last.API != APITxnCompletion || last.ProducerID != 7 || last.Commit != commit || last.Group != "g" {
			t.Fatalf("last event %+v, want the completion of producer 7", last)
		}
	}
}

// A commit marker applies a transactional offset only over an older one:
// a consumer's commit appended after the transactional batch wins.
func TestTxnOffsetCommitOlderThanPlainCommit(t *testing.T) {
	h := newHarness(t, nil)
	h.loadAll()
	tp := TopicPartition{"t", 0}
	h.txnCommit(TxnCommitRequest{Group: "g", ProducerID: 7, ProducerEpoch: 0}, map[TopicPartition]int64{tp: 9})
	h.commit("g", "", -1, map[TopicPartition]int64{tp: 12})
	h.c.HandleTxnCompletion(7, []int32{h.c.PartitionFor("g")}, true)
	if f := h.fetchOne("g", tp, true); f.Offset != 12 {
		t.Fatalf("offset %d, want the newer plain commit's 12", f.Offset)
	}
}

func TestTxnOffsetCommitChecks(t *testing.T) {
	h := newHarness(t, nil)
	tp := TopicPartition{"t", 0}
	wantCodes(t, "not loaded", h.txnCommit(TxnCommitRequest{Group: "g", ProducerID: 1}, map[TopicPartition]int64{tp: 1}), errNotCoordinator)
	h.loadAll()
	wantCodes(t, "empty group id", h.txnCommit(TxnCommitRequest{Group: "", ProducerID: 1}, map[TopicPartition]int64{tp: 1}), errInvalidGroupID)
	ids, gen := h.stableGroup("g", 1)
	wantCodes(t, "unknown member", h.txnCommit(TxnCommitRequest{Group: "g", ProducerID: 1, MemberID: "nobody", Generation: gen}, map[TopicPartition]int64{tp: 1}), errUnknownMemberID)
	wantCodes(t, "old generation", h.txnCommit(TxnCommitRequest{Group: "g", ProducerID: 1, MemberID: ids[0], Generation: gen - 1}, map[TopicPartition]int64{tp: 1}), errIllegalGeneration)
	wantCodes(t, "member and generation", h.txnCommit(TxnCommitRequest{Group: "g", ProducerID: 1, MemberID: ids[0], Generation: gen}, map[TopicPartition]int64{tp: 1}), 0)
	wantCodes(t, "no member (before v3)", h.txnCommit(TxnCommitRequest{Group: "g", ProducerID: 1}, map[TopicPartition]int64{tp: 2}), 0)

	// A failed append leaves nothing pending.
	h.log.failNext = kerr.NotLeaderForPartition
	wantCodes(t, "append failed", h.txnCommit(TxnCommitRequest{Group: "g2", ProducerID: 3}, map[TopicPartition]int64{tp: 1}), errNotCoordinator)
	if f := h.fetchOne("g2", tp, true); f.Err != 0 || f.Offset != -1 {
		t.Fatalf("after a failed append: %+v, want no offset and nothing pending", f)
	}
	// 2.6.3 keeps the group listed for the producer (it asks whether
	// anything was pending before dropping this commit's offsets); a
	// later commit marker then finds nothing to apply.
	h.c.HandleTxnCompletion(3, []int32{h.c.PartitionFor("g2")}, true)
	if f := h.fetchOne("g2", tp, true); f.Err != 0 || f.Offset != -1 {
		t.Fatalf("after the marker of a failed commit: %+v, want no offset", f)
	}
}

// Loading __consumer_offsets applies what the markers in the log decided
// and keeps an undecided transaction's offsets pending, for the marker
// that comes after the load.
func TestLoadTransactionalOffsets(t *testing.T) {
	log := newMemLog()
	first := newHarness(t, log)
	first.loadAll()
	a, b, c := TopicPartition{"t", 0}, TopicPartition{"t", 1}, TopicPartition{"t", 2}
	first.commit("g", "", -1, map[TopicPartition]int64{a: 1, b: 1, c: 1})
	first.txnCommit(TxnCommitRequest{Group: "g", ProducerID: 10}, map[TopicPartition]int64{a: 20})
	first.txnCommit(TxnCommitRequest{Group: "g", ProducerID: 11}, map[TopicPartition]int64{b: 21})
	first.txnCommit(TxnCommitRequest{Group: "g", ProducerID: 12}, map[TopicPartition]int64{c: 22})
	p := first.c.PartitionFor("g")
	log.marker(p, 10, true)
	log.marker(p, 11, false)

	second := newHarness(t, log)
	second.loadAll()
	if f := second.fetchOne("g", a, true); f.Offset != 20 {
		t.Errorf("committed transaction: offset %d, want 20", f.Offset)
	}
	if f := second.fetchOne("g", b, true); f.Offset != 1 {
		t.Errorf("aborted transaction: offset %d, want 1", f.Offset)
	}
	if f := second.fetchOne("g", c, true); f.Err != errUnstableOffsetCommit {
		t.Errorf("undecided transaction: error %d, want UNSTABLE_OFFSET_COMMIT", f.Err)
	}
	second.c.HandleTxnCompletion(12, []int32{p}, true)
	if f := second.fetchOne("g", c, true); f.Err != 0 || f.Offset != 22 {
		t.Errorf("undecided transaction after its commit marker: %+v, want offset 22", f)
	}

	// A group that only a producer's open transaction names loads too.
	log2 := newMemLog()
	h := newHarness(t, log2)
	h.loadAll()
	h.txnCommit(TxnCommitRequest{Group: "only-txn", ProducerID: 5}, map[TopicPartition]int64{a: 3})
	again := newHarness(t, log2)
	if err := errors.Join(loadErrs(again)...); err != nil {
		t.Fatal(err)
	}
	if f := again.fetchOne("only-txn", a, true); f.Err != errUnstableOffsetCommit {
		t.Errorf("pending-only group: %+v, want UNSTABLE_OFFSET_COMMIT", f)
	}
}

func loadErrs(h *harness) []error {
	var errs []error
	for p := int32(0); p < testPartitions; p++ {
		errs = append(errs, h.c.Load(p, h.log.records(p)))
	}
	return errs
}

// Unloading a partition forgets its groups' open transactions: a marker
// that reaches this broker afterwards changes nothing here.
func TestUnloadForgetsProducerGroups(t *testing.T) {
	h := newHarness(t, nil)
	h.loadAll()
	tp := TopicPartition{"t", 0}
	h.txnCommit(TxnCommitRequest{Group: "g", ProducerID: 4}, map[TopicPartition]int64{tp: 3})
	h.c.Unload(h.c.PartitionFor("g"))
	var n int
	h.c.run(func() { n = len(h.c.producerGroups) })
	if n != 0 {
		t.Fatalf("%d producers still listed after the unload", n)
	}
	h.c.HandleTxnCompletion(4, []int32{h.c.PartitionFor("g")}, true)
}
