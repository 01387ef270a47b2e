package history

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Client operations in Jepsen's shape, and the compact form a read's records
// are written in.

// OpType is the Jepsen type of a client operation event.
type OpType string

// Jepsen's four op types. An invoke is followed (same Process) by exactly one
// ok, fail or info. fail means the operation certainly did not happen; info
// means the outcome is unknown (timeout, connection lost): it may or may not
// have taken effect, now or later.
const (
	OpInvoke OpType = "invoke"
	OpOK     OpType = "ok"
	OpFail   OpType = "fail"
	OpInfo   OpType = "info"
)

// Client functions (ClientOp.F).
const (
	FProduce = "produce" // Value → Offset
	FRead    = "read"    // fetch from Offset → Records (empty: nothing there yet)

	// Control-plane operations (workloads/admin.go), driven through
	// ZooKeeper as ZooKeeper-era admin tools did. ok means the controller
	// completed the request; Value on the invoke is the request, on the ok
	// what the partition state showed afterwards.
	FCreateTopic        = "create-topic"        // Topic; Value: the assignment
	FReassign           = "reassign"            // Topic, Partition; Value: the target replicas
	FPreferredElection  = "preferred-election"  // Topic, Partition
	FControlledShutdown = "controlled-shutdown" // Broker: the broker stopped with SIGTERM and restarted
	FDeleteTopic        = "delete-topic"        // Topic; ok once the controller removed its znodes
)

// Acks values a producer may use (ClientOp.Acks).
const (
	AcksAll    = -1
	AcksNone   = 0
	AcksLeader = 1
)

// ClientOp is a client operation event in Jepsen's shape. A produce invoke
// carries Topic, Partition, Value and Acks; its ok carries the assigned Offset.
// A read invoke carries Topic, Partition and the fetch Offset; its ok carries
// Records, the consecutive records from Offset (an empty list means the
// partition had nothing readable at Offset). Final marks the final full reads
// made after healing, which the durability checker treats as the truth.
type ClientOp struct {
	_ struct{}

	Type      OpType   `json:"type"`
	Process   int      `json:"process"`
	F         string   `json:"f"`
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Value     string   `json:"value,omitempty"`
	Offset    int64    `json:"offset"`
	Acks      int      `json:"acks,omitempty"`
	Records   []Record `json:"records,omitempty"`
	Final     bool     `json:"final,omitempty"`
	Error     string   `json:"error,omitempty"`
	ErrorCode int16    `json:"error_code,omitempty"`

	// Who answered a read (set on a read's ok/fail/info when known): the
	// broker the fetch was sent to, the leader epoch the client sent as the
	// partition's current leader epoch and the broker accepted (nil: unknown,
	// e.g. an older history), and the high watermark the response carried.
	// Explanations name them; the linearizability and known-anomaly checks
	// use them to tell a lagging new leader (KAFKA-2334) from a lost write.
	Broker      int32  `json:"broker,omitempty"`
	LeaderEpoch *int32 `json:"leader_epoch,omitempty"`
	HW          *int64 `json:"hw,omitempty"`

	// Idempotent is set on a produce (invoke and completion) sent by an
	// idempotent producer (KIP-98: producer id, epoch and sequence numbers),
	// whose resends the leader must not append twice. False on histories
	// written before it existed: their producers were not idempotent.
	Idempotent bool `json:"idempotent,omitempty"`
}

// TP returns the op's partition.
func (o *ClientOp) TP() TopicPartition { return TP(o.Topic, o.Partition) }

// clientOpJSON is ClientOp as written. A read's records, which are almost
// always consecutive, are written compactly as "values" (the record values
// in offset order) starting at "from" (omitted when it equals the fetch
// offset): {"f":"read","offset":4887,"values":["p6-3038","p6-3039"]} means
// offset 4887 held p6-3038 and 4888 held p6-3039. Records that are not
// consecutive are written as "records" [{"offset":..,"value":..}], which is
// also how histories written before this encoding store every read.
//
// It is ClientOp's own fields (opFields, ClientOp without its JSON
// methods) and the compact form's two; MarshalJSON writes "from" and
// "values" where "records" would stand, so a line keeps the field order
// it always had.
type clientOpJSON struct {
	opFields
	compactRecords
}

// compactRecords is the compact form of consecutive records.
type compactRecords struct {
	From   *int64   `json:"from,omitempty"`
	Values []string `json:"values,omitempty"`
}

// opFields is ClientOp as encoding/json sees it without MarshalJSON and
// UnmarshalJSON.
type opFields ClientOp

// recordsSlot marks where "records" stands in an op's line: a member that
// cannot occur anywhere else in it (quotes inside JSON strings are
// escaped), replaced by the compact form.
var (
	recordsSlot     = []Record{{Offset: -1}}
	recordsSlotJSON = []byte(`"records":[{"offset":-1,"value":""}]`)
)

// MarshalJSON writes the op with its records in the compact form when they
// are consecutive (see clientOpJSON).
func (o *ClientOp) MarshalJSON() ([]byte, error) {
	if !consecutive(o.Records) {
		return json.Marshal((*opFields)(o))
	}
	w := *o
	w.Records = recordsSlot
	b, err := json.Marshal((*opFields)(&w))
	if err != nil {
		return nil, err
	}
	var c compactRecords
	if from := o.Records[0].Offset; from != o.Offset {
		c.From = &from
	}
	c.Values = make([]string, len(o.Records))
	for i, r := range o.Records {
		c.Values[i] = r.Value
	}
	compact, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	// {"from":..,"values":[..]} without its braces, in the slot.
	return bytes.Replace(b, recordsSlotJSON, compact[1:len(compact)-1], 1), nil
}

// UnmarshalJSON reads either form of a read's records.
func (o *ClientOp) UnmarshalJSON(b []byte) error {
	var w clientOpJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	return w.to(o)
}

// to sets o from the decoded wire form.
func (w *clientOpJSON) to(o *ClientOp) error {
	*o = ClientOp(w.opFields)
	if w.Values == nil {
		if w.From != nil {
			return errors.New(`op has "from" without "values"`)
		}
		return nil
	}
	if w.Records != nil {
		return errors.New(`op has both "records" and "values"`)
	}
	from := w.Offset
	if w.From != nil {
		from = *w.From
	}
	o.Records = make([]Record, len(w.Values))
	for i, v := range w.Values {
		o.Records[i] = Record{Offset: from + int64(i), Value: v}
	}
	return nil
}

// consecutive reports whether recs is non-empty and its offsets go up by one.
func consecutive(recs []Record) bool {
	if len(recs) == 0 {
		return false
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Offset != recs[i-1].Offset+1 {
			return false
		}
	}
	return true
}

// Record is one record as read back: its offset and value.
type Record struct {
	Offset int64  `json:"offset"`
	Value  string `json:"value"`
}
