package history

// This file is the reader's fast path: a decoder for the lines that make up
// nearly all of a history (client ops, produce_append/produce_ack and
// hw_advance, as Writer writes them), which fills the Event directly instead
// of going through the reflective JSON decoder. It accepts only lines whose
// meaning is beyond doubt: one object, known keys spelled exactly, each at
// most once, no whitespace, no escapes, no null, integers without fraction
// or exponent that fit their field. Anything else (another kind's payload,
// an unknown key, an escape, a number out of range, malformed JSON) makes it
// give up, and the general decoder (decodeEvent) decodes the line and
// reports what is wrong with it. So on every line the fast path takes, the
// Event is the one the general decoder would build.

import (
	"math"
	"strings"
	"unsafe"

	"github.com/zkchaos/zkchaos/internal/hugepage"
)

// fastDecoder decodes lines on the fast path. It hands out payloads from
// slabs (one allocation per slab rather than one per payload) and keeps one
// copy of each short string that repeats (topic, op type, function).
type fastDecoder struct {
	ops     slab[ClientOp]
	appends slab[Append]
	hws     slab[HWAdvance]
	recs    slab[Record]
	strs    slab[string] // produce_append values
	epochs  slab[int32]
	hwVals  slab[int64]
	topic   string // the last topic decoded, reused while it repeats
	values  []string
	// text holds the strings decoded (values, errors) back to back: one
	// allocation per arenaLen bytes rather than one per string. A
	// strings.Builder never changes bytes it has handed out.
	text strings.Builder
}

const arenaLen = 64 << 10

// str returns b as a string from the arena.
func (d *fastDecoder) str(b []byte) string {
	if len(b) > arenaLen/8 {
		return string(b)
	}
	if d.text.Cap()-d.text.Len() < len(b) {
		d.text = strings.Builder{}
		d.text.Grow(arenaLen)
	}
	start := d.text.Len()
	d.text.Write(b)
	return d.text.String()[start:]
}

func (d *fastDecoder) newEpoch(v int32) *int32 {
	p := &d.epochs.take(1)[0]
	*p = v
	return p
}

func (d *fastDecoder) newHWValue(v int64) *int64 {
	p := &d.hwVals.take(1)[0]
	*p = v
	return p
}

func (d *fastDecoder) newOp() *ClientOp       { return &d.ops.take(1)[0] }
func (d *fastDecoder) newAppend() *Append     { return &d.appends.take(1)[0] }
func (d *fastDecoder) newHW() *HWAdvance      { return &d.hws.take(1)[0] }
func (d *fastDecoder) records(n int) []Record { return d.recs.take(n) }

// slab hands out zeroed elements from arrays allocated slabLen at first and
// four times as large each time after, up to slabBytes: a small history costs a
// few small arrays, a large one few allocations, and large slabs are backed
// by huge pages (hugepage.Advise) so filling them costs few page faults.
type slab[T any] struct {
	free []T
	next int // length of the next array
}

const (
	slabLen   = 256
	slabBytes = 8 << 20
)

// take returns n zeroed elements whose capacity ends at n, so an append to
// one event's slice cannot reach the next's.
func (s *slab[T]) take(n int) []T {
	if n > len(s.free) {
		var zero T
		size := max(s.next, slabLen)
		s.next = max(slabLen, min(4*size, slabBytes/int(max(unsafe.Sizeof(zero), 1))))
		s.free = make([]T, max(size, n))
		hugepage.Advise(s.free)
	}
	r := s.free[:n:n]
	s.free = s.free[n:]
	return r
}

// scan is a position in one line.
type scan struct {
	b []byte
	i int
}

func (s *scan) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string without escapes or control characters and returns its
// bytes (a slice of the line).
func (s *scan) str() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// int reads an integer in [lo, hi]: JSON's grammar (no leading zero, no
// '+'), with no fraction or exponent.
func (s *scan) int(lo, hi int64) (int64, bool) {
	start := s.i
	neg := s.eat('-')
	digits := s.i
	var v uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if v > (math.MaxUint64-9)/10 {
			return 0, false
		}
		v = v*10 + uint64(s.b[s.i]-'0')
		s.i++
	}
	n := s.i - digits
	if n == 0 || (n > 1 && s.b[digits] == '0') {
		return 0, false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false
	}
	var x int64
	switch {
	case !neg && v <= math.MaxInt64:
		x = int64(v)
	case neg && v <= math.MaxInt64:
		x = -int64(v)
	case neg && v == math.MaxInt64+1:
		x = math.MinInt64
	default:
		s.i = start
		return 0, false
	}
	if x < lo || x > hi {
		return 0, false
	}
	return x, true
}

func (s *scan) uint() (uint64, bool) {
	digits := s.i
	var v uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		d := uint64(s.b[s.i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
		s.i++
	}
	n := s.i - digits
	if n == 0 || (n > 1 && s.b[digits] == '0') {
		return 0, false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false
	}
	return v, true
}

func (s *scan) bool() (bool, bool) {
	switch {
	case s.i+4 <= len(s.b) && string(s.b[s.i:s.i+4]) == "true":
		s.i += 4
		return true, true
	case s.i+5 <= len(s.b) && string(s.b[s.i:s.i+5]) == "false":
		s.i += 5
		return false, true
	}
	return false, false
}

// object walks the members of an object, calling member for each key with
// the scanner at its value; member returns false to give up. A key seen
// twice gives up too (seen is a bit per key, numbered by member).
func (s *scan) object(member func(key []byte) bool) bool {
	if !s.eat('{') {
		return false
	}
	if s.eat('}') {
		return true
	}
	for {
		k, ok := s.str()
		if !ok || !s.eat(':') || !member(k) {
			return false
		}
		if s.eat('}') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// once marks bit in seen and reports whether it was clear.
func once(seen *uint32, bit uint) bool {
	if *seen&(1<<bit) != 0 {
		return false
	}
	*seen |= 1 << bit
	return true
}

// decode decodes b into ev on the fast path, reporting whether it could;
// when it could not, ev is left for the general decoder to overwrite.
func (d *fastDecoder) decode(b []byte, ev *Event, lastSource string) bool {
	s := scan{b: b}
	*ev = Event{}
	var seen uint32
	ok := s.object(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "v":
			var v int64
			v, ok = s.int(math.MinInt, math.MaxInt)
			ev.V = int(v)
			return ok && once(&seen, 0)
		case "ts":
			ev.Time, ok = s.int(math.MinInt64, math.MaxInt64)
			return ok && once(&seen, 1)
		case "src":
			var src []byte
			if src, ok = s.str(); !ok {
				return false
			}
			if string(src) == lastSource {
				ev.Source = lastSource
			} else {
				ev.Source = string(src)
			}
			return once(&seen, 2)
		case "seq":
			ev.Seq, ok = s.uint()
			return ok && once(&seen, 3)
		case "node":
			var v int64
			v, ok = s.int(math.MinInt32, math.MaxInt32)
			ev.Node = int32(v)
			return ok && once(&seen, 4)
		case "kind":
			var kind []byte
			if kind, ok = s.str(); !ok {
				return false
			}
			for _, c := range Kinds {
				if string(kind) == string(c) {
					ev.Kind = c
					return once(&seen, 5)
				}
			}
			return false
		case "op":
			ev.Op = d.newOp()
			return d.op(&s, ev.Op) && once(&seen, 6)
		case "append":
			ev.Append = d.newAppend()
			return d.append(&s, ev.Append) && once(&seen, 7)
		case "hw":
			ev.HW = d.newHW()
			return d.hw(&s, ev.HW) && once(&seen, 8)
		}
		return false
	})
	return ok && s.i == len(s.b)
}

// topicOf returns the topic, reusing the previous one's string.
func (d *fastDecoder) topicOf(b []byte) string {
	if string(b) != d.topic {
		d.topic = string(b)
	}
	return d.topic
}

// common returns one of the strings in known equal to b, or a copy of b.
func common(b []byte, known ...string) string {
	for _, k := range known {
		if string(b) == k {
			return k
		}
	}
	return string(b)
}

// op decodes a client op in its wire form (clientOpJSON) into o, as
// clientOpJSON.to would.
func (d *fastDecoder) op(s *scan, o *ClientOp) bool {
	var (
		seen    uint32
		from    int64
		hasFrom bool
	)
	d.values = d.values[:0]
	hasValues := false
	ok := s.object(func(k []byte) bool {
		var (
			ok bool
			b  []byte
			v  int64
		)
		switch string(k) {
		case "type":
			if b, ok = s.str(); ok {
				o.Type = OpType(common(b, string(OpInvoke), string(OpOK), string(OpFail), string(OpInfo)))
			}
			return ok && once(&seen, 0)
		case "process":
			v, ok = s.int(math.MinInt, math.MaxInt)
			o.Process = int(v)
			return ok && once(&seen, 1)
		case "f":
			if b, ok = s.str(); ok {
				o.F = common(b, FProduce, FRead)
			}
			return ok && once(&seen, 2)
		case "topic":
			if b, ok = s.str(); ok {
				o.Topic = d.topicOf(b)
			}
			return ok && once(&seen, 3)
		case "partition":
			v, ok = s.int(math.MinInt32, math.MaxInt32)
			o.Partition = int32(v)
			return ok && once(&seen, 4)
		case "value":
			if b, ok = s.str(); ok {
				o.Value = d.str(b)
			}
			return ok && once(&seen, 5)
		case "offset":
			o.Offset, ok = s.int(math.MinInt64, math.MaxInt64)
			return ok && once(&seen, 6)
		case "acks":
			v, ok = s.int(math.MinInt, math.MaxInt)
			o.Acks = int(v)
			return ok && once(&seen, 7)
		case "from":
			from, ok = s.int(math.MinInt64, math.MaxInt64)
			hasFrom = true
			return ok && once(&seen, 8)
		case "values":
			hasValues = true
			return d.strings(s) && once(&seen, 9)
		case "final":
			o.Final, ok = s.bool()
			return ok && once(&seen, 10)
		case "error":
			if b, ok = s.str(); ok {
				o.Error = d.str(b)
			}
			return ok && once(&seen, 11)
		case "error_code":
			v, ok = s.int(math.MinInt16, math.MaxInt16)
			o.ErrorCode = int16(v)
			return ok && once(&seen, 12)
		case "broker":
			v, ok = s.int(math.MinInt32, math.MaxInt32)
			o.Broker = int32(v)
			return ok && once(&seen, 13)
		case "leader_epoch":
			v, ok = s.int(math.MinInt32, math.MaxInt32)
			o.LeaderEpoch = d.newEpoch(int32(v))
			return ok && once(&seen, 14)
		case "hw":
			v, ok = s.int(math.MinInt64, math.MaxInt64)
			o.HW = d.newHWValue(v)
			return ok && once(&seen, 15)
		case "idempotent":
			o.Idempotent, ok = s.bool()
			return ok && once(&seen, 16)
		}
		return false // "records" (the older form) and anything else
	})
	if !ok || (hasFrom && !hasValues) {
		return false // the general decoder names the error, if any
	}
	if !hasValues {
		return true
	}
	if !hasFrom {
		from = o.Offset
	}
	o.Records = d.records(len(d.values))
	for i, v := range d.values {
		o.Records[i] = Record{Offset: from + int64(i), Value: v}
	}
	return true
}

// strings decodes a non-empty array of strings into d.values.
func (d *fastDecoder) strings(s *scan) bool {
	if !s.eat('[') {
		return false
	}
	for {
		b, ok := s.str()
		if !ok {
			return false // an empty array too: left to the general decoder
		}
		d.values = append(d.values, d.str(b))
		if s.eat(']') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

func (d *fastDecoder) append(s *scan, a *Append) bool {
	var seen uint32
	return s.object(func(k []byte) bool {
		var (
			ok bool
			b  []byte
			v  int64
		)
		switch string(k) {
		case "topic":
			if b, ok = s.str(); ok {
				a.Topic = d.topicOf(b)
			}
			return ok && once(&seen, 0)
		case "partition":
			v, ok = s.int(math.MinInt32, math.MaxInt32)
			a.Partition = int32(v)
			return ok && once(&seen, 1)
		case "base_offset":
			a.BaseOffset, ok = s.int(math.MinInt64, math.MaxInt64)
			return ok && once(&seen, 2)
		case "last_offset":
			a.LastOffset, ok = s.int(math.MinInt64, math.MaxInt64)
			return ok && once(&seen, 3)
		case "leader_epoch":
			v, ok = s.int(math.MinInt32, math.MaxInt32)
			a.LeaderEpoch = int32(v)
			return ok && once(&seen, 4)
		case "acks":
			v, ok = s.int(math.MinInt, math.MaxInt)
			a.Acks = int(v)
			return ok && once(&seen, 5)
		case "values":
			d.values = d.values[:0]
			if !d.strings(s) {
				return false
			}
			a.Values = d.strs.take(len(d.values))
			copy(a.Values, d.values)
			return once(&seen, 6)
		}
		return false
	})
}

func (d *fastDecoder) hw(s *scan, h *HWAdvance) bool {
	var seen uint32
	return s.object(func(k []byte) bool {
		var (
			ok bool
			b  []byte
			v  int64
		)
		switch string(k) {
		case "topic":
			if b, ok = s.str(); ok {
				h.Topic = d.topicOf(b)
			}
			return ok && once(&seen, 0)
		case "partition":
			v, ok = s.int(math.MinInt32, math.MaxInt32)
			h.Partition = int32(v)
			return ok && once(&seen, 1)
		case "old":
			h.Old, ok = s.int(math.MinInt64, math.MaxInt64)
			return ok && once(&seen, 2)
		case "new":
			h.New, ok = s.int(math.MinInt64, math.MaxInt64)
			return ok && once(&seen, 3)
		case "leader_epoch":
			v, ok = s.int(math.MinInt32, math.MaxInt32)
			h.LeaderEpoch = int32(v)
			return ok && once(&seen, 4)
		}
		return false
	})
}
