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
	// The line's source before this one, and an op's "from" and whether
	// it had "from" and "values": decodeMembers's members keep them here.
	line               scan
	lastSource         string
	from               int64
	hasFrom, hasValues bool
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

// member is how one key of an object decodes: dec reads the value at s
// into x. A payload's members are a table (eventMembers, opMembers, ...),
// so every kind's decoder is the same loop (decodeMembers).
type member[T any] struct {
	key string
	dec func(d *fastDecoder, s *scan, x *T) bool
}

// decodeMembers decodes an object into x: every key must be one of ms
// (spelled exactly) and appear at most once.
func decodeMembers[T any](d *fastDecoder, s *scan, x *T, ms []member[T]) bool {
	var seen uint32 // a bit per member
	next := 0       // where the next key is looked for first
	return s.object(func(k []byte) bool {
		// Writer writes the members in table order, so the key is
		// nearly always the next member or a few (omitted) ones on:
		// looking from the previous match finds it in a compare or two.
		for n, i := 0, next; n < len(ms); n++ {
			if string(k) == ms[i].key {
				if seen&(1<<i) != 0 {
					return false
				}
				seen |= 1 << i
				next = i + 1
				if next == len(ms) {
					next = 0
				}
				return ms[i].dec(d, s, x)
			}
			if i++; i == len(ms) {
				i = 0
			}
		}
		return false
	})
}

type integer interface {
	~int | ~int16 | ~int32 | ~int64
}

// scanInt reads an integer that must fit N into *p. Members call these
// helpers directly (a field's address in, no accessor to call through),
// which keeps the table as fast as the hand-written decoders it replaced.
func scanInt[N integer](s *scan, p *N) bool {
	hi := int64(uint64(1)<<(8*unsafe.Sizeof(*p)-1) - 1)
	v, ok := s.int(-hi-1, hi)
	*p = N(v)
	return ok
}

// topicTo reads a topic into *p: the previous one's string while it
// repeats.
func (d *fastDecoder) topicTo(s *scan, p *string) bool {
	b, ok := s.str()
	if ok && string(b) != d.topic {
		d.topic = string(b)
	}
	*p = d.topic
	return ok
}

// textTo reads a string into *p, kept in the decoder's arena.
func (d *fastDecoder) textTo(s *scan, p *string) bool {
	b, ok := s.str()
	*p = d.str(b)
	return ok
}

// commonTo reads a string that is nearly always one of known, which are
// shared rather than copied.
func commonTo[S ~string](s *scan, p *S, known ...S) bool {
	b, ok := s.str()
	if !ok {
		return false
	}
	for _, k := range known {
		if string(b) == string(k) {
			*p = k
			return true
		}
	}
	*p = S(b)
	return true
}

func (s *scan) boolTo(p *bool) bool {
	var ok bool
	*p, ok = s.bool()
	return ok
}

// payloadMember is a payload object of type P, taken from the decoder's
// slab by take and decoded by its own members.
func payloadMember[P any](key string, take func(*fastDecoder) *P, at func(*Event) **P, ms *[]member[P]) member[Event] {
	return member[Event]{key, func(d *fastDecoder, s *scan, e *Event) bool {
		p := take(d)
		*at(e) = p
		return decodeMembers(d, s, p, *ms)
	}}
}

// decode decodes b into ev on the fast path, reporting whether it could;
// when it could not, ev is left for the general decoder to overwrite.
func (d *fastDecoder) decode(b []byte, ev *Event, lastSource string) bool {
	// The scan lives in d: handed to members through function values, a
	// local one would be moved to the heap, an allocation per line.
	d.line = scan{b: b}
	*ev = Event{}
	d.lastSource = lastSource
	return decodeMembers(d, &d.line, ev, eventMembers) && d.line.i == len(b)
}

// eventMembers are the keys of a line the fast path takes: the header and
// the payloads of client ops, produce_append/ack and hw_advance.
var eventMembers = []member[Event]{
	{"v", func(_ *fastDecoder, s *scan, e *Event) bool { return scanInt(s, &e.V) }},
	{"ts", func(_ *fastDecoder, s *scan, e *Event) bool { return scanInt(s, &e.Time) }},
	{"src", func(d *fastDecoder, s *scan, e *Event) bool {
		src, ok := s.str()
		if string(src) == d.lastSource {
			e.Source = d.lastSource
		} else {
			e.Source = string(src)
		}
		return ok
	}},
	{"seq", func(_ *fastDecoder, s *scan, e *Event) bool {
		var ok bool
		e.Seq, ok = s.uint()
		return ok
	}},
	{"node", func(_ *fastDecoder, s *scan, e *Event) bool { return scanInt(s, &e.Node) }},
	{"kind", func(_ *fastDecoder, s *scan, e *Event) bool {
		kind, ok := s.str()
		for _, c := range Kinds {
			if ok && string(kind) == string(c) {
				e.Kind = c
				return true
			}
		}
		return false
	}},
	{"op", func(d *fastDecoder, s *scan, e *Event) bool {
		e.Op = d.newOp()
		return d.op(s, e.Op)
	}},
	payloadMember("append", (*fastDecoder).newAppend, func(e *Event) **Append { return &e.Append }, &appendMembers),
	payloadMember("hw", (*fastDecoder).newHW, func(e *Event) **HWAdvance { return &e.HW }, &hwMembers),
}

// op decodes a client op in its wire form (clientOpJSON) into o, as
// clientOpJSON.to would.
func (d *fastDecoder) op(s *scan, o *ClientOp) bool {
	d.values, d.hasValues, d.hasFrom = d.values[:0], false, false
	if !decodeMembers(d, s, o, opMembers) || (d.hasFrom && !d.hasValues) {
		return false // "records" (the older form) and anything else: the general decoder names the error, if any
	}
	if !d.hasValues {
		return true
	}
	from := o.Offset
	if d.hasFrom {
		from = d.from
	}
	o.Records = d.records(len(d.values))
	for i, v := range d.values {
		o.Records[i] = Record{Offset: from + int64(i), Value: v}
	}
	return true
}

// opMembers are a client op's keys in the compact form.
var opMembers = []member[ClientOp]{
	{"type", func(_ *fastDecoder, s *scan, o *ClientOp) bool {
		return commonTo(s, &o.Type, OpInvoke, OpOK, OpFail, OpInfo)
	}},
	{"process", func(_ *fastDecoder, s *scan, o *ClientOp) bool { return scanInt(s, &o.Process) }},
	{"f", func(_ *fastDecoder, s *scan, o *ClientOp) bool { return commonTo(s, &o.F, FProduce, FRead) }},
	{"topic", func(d *fastDecoder, s *scan, o *ClientOp) bool { return d.topicTo(s, &o.Topic) }},
	{"partition", func(_ *fastDecoder, s *scan, o *ClientOp) bool { return scanInt(s, &o.Partition) }},
	{"value", func(d *fastDecoder, s *scan, o *ClientOp) bool { return d.textTo(s, &o.Value) }},
	{"offset", func(_ *fastDecoder, s *scan, o *ClientOp) bool { return scanInt(s, &o.Offset) }},
	{"acks", func(_ *fastDecoder, s *scan, o *ClientOp) bool { return scanInt(s, &o.Acks) }},
	{"from", func(d *fastDecoder, s *scan, _ *ClientOp) bool {
		var ok bool
		d.from, ok = s.int(math.MinInt64, math.MaxInt64)
		d.hasFrom = true
		return ok
	}},
	{"values", func(d *fastDecoder, s *scan, _ *ClientOp) bool {
		d.hasValues = true
		return d.strings(s)
	}},
	{"final", func(_ *fastDecoder, s *scan, o *ClientOp) bool { return s.boolTo(&o.Final) }},
	{"error", func(d *fastDecoder, s *scan, o *ClientOp) bool { return d.textTo(s, &o.Error) }},
	{"error_code", func(_ *fastDecoder, s *scan, o *ClientOp) bool { return scanInt(s, &o.ErrorCode) }},
	{"broker", func(_ *fastDecoder, s *scan, o *ClientOp) bool { return scanInt(s, &o.Broker) }},
	{"leader_epoch", func(d *fastDecoder, s *scan, o *ClientOp) bool {
		v, ok := s.int(math.MinInt32, math.MaxInt32)
		o.LeaderEpoch = d.newEpoch(int32(v))
		return ok
	}},
	{"hw", func(d *fastDecoder, s *scan, o *ClientOp) bool {
		v, ok := s.int(math.MinInt64, math.MaxInt64)
		o.HW = d.newHWValue(v)
		return ok
	}},
	{"idempotent", func(_ *fastDecoder, s *scan, o *ClientOp) bool { return s.boolTo(&o.Idempotent) }},
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

var appendMembers = []member[Append]{
	{"topic", func(d *fastDecoder, s *scan, a *Append) bool { return d.topicTo(s, &a.Topic) }},
	{"partition", func(_ *fastDecoder, s *scan, a *Append) bool { return scanInt(s, &a.Partition) }},
	{"base_offset", func(_ *fastDecoder, s *scan, a *Append) bool { return scanInt(s, &a.BaseOffset) }},
	{"last_offset", func(_ *fastDecoder, s *scan, a *Append) bool { return scanInt(s, &a.LastOffset) }},
	{"leader_epoch", func(_ *fastDecoder, s *scan, a *Append) bool { return scanInt(s, &a.LeaderEpoch) }},
	{"acks", func(_ *fastDecoder, s *scan, a *Append) bool { return scanInt(s, &a.Acks) }},
	{"values", func(d *fastDecoder, s *scan, a *Append) bool {
		d.values = d.values[:0]
		if !d.strings(s) {
			return false
		}
		a.Values = d.strs.take(len(d.values))
		copy(a.Values, d.values)
		return true
	}},
}

var hwMembers = []member[HWAdvance]{
	{"topic", func(d *fastDecoder, s *scan, h *HWAdvance) bool { return d.topicTo(s, &h.Topic) }},
	{"partition", func(_ *fastDecoder, s *scan, h *HWAdvance) bool { return scanInt(s, &h.Partition) }},
	{"old", func(_ *fastDecoder, s *scan, h *HWAdvance) bool { return scanInt(s, &h.Old) }},
	{"new", func(_ *fastDecoder, s *scan, h *HWAdvance) bool { return scanInt(s, &h.New) }},
	{"leader_epoch", func(_ *fastDecoder, s *scan, h *HWAdvance) bool { return scanInt(s, &h.LeaderEpoch) }},
}
