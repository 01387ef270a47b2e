package history

import (
	"errors"
	"strings"
	"testing"
)

// A queue op survives the writer and the reader, and a completion without
// its invoke is refused with the line.
func TestQueueOpRoundTripAndPairing(t *testing.T) {
	inv := `{"v":1,"ts":10,"src":"client-0","seq":0,"kind":"queue_op","queue":{"type":"invoke","process":3,"f":"txn","topic":"q","mops":[{"f":"send","key":1,"value":7},{"f":"poll"}]}}`
	ok := `{"v":1,"ts":11,"src":"client-0","seq":1,"kind":"queue_op","queue":{"type":"ok","process":3,"f":"txn","topic":"q","mops":[{"f":"send","key":1,"value":7,"offset":4},{"f":"poll","polled":[{"key":2,"records":[{"offset":0,"value":5}]}]}],"isolation":"read_committed","assignment":{"mode":"subscribe","group":"g","member":"m","generation":2,"keys":[2]}}}`
	evs, _, err := Decode(strings.NewReader(inv+"\n"+ok+"\n"), "client-0.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	q := evs[1].Queue
	if q == nil || q.Mops[0].Offset != 4 || q.Mops[1].Polled[0].Records[0].Value != 5 || q.Assignment.Generation != 2 {
		t.Fatalf("decoded %+v", q)
	}
	ops := QueueOperations(New(evs))
	if len(ops) != 1 || ops[0].Outcome() != OpOK {
		t.Fatalf("paired %+v", ops)
	}
	_, _, err = Decode(strings.NewReader(ok+"\n"), "client-0.jsonl")
	if !errors.Is(err, ErrNoInvoke) || !strings.Contains(err.Error(), "client-0.jsonl:1") {
		t.Fatalf("completion without invoke: %v", err)
	}
	bad := strings.Replace(inv, `"f":"poll"`, `"f":"peek"`, 1)
	if _, _, err := Decode(strings.NewReader(bad+"\n"), "client-0.jsonl"); err == nil || !strings.Contains(err.Error(), "peek") {
		t.Fatalf("unknown micro-op: %v", err)
	}
}
