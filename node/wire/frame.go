// Package wire owns the node program's Kafka wire protocol framing: the
// request and response headers around franz-go kmsg bodies, a server that
// dispatches framed requests to handlers registered per API key and version
// range, and a small client the controller uses to send control requests.
//
// kmsg encodes and decodes message bodies but has no request-header parser;
// that is what this package adds. It knows nothing about controllers,
// brokers or epochs, and it never panics on network input: every malformed
// frame is an error (tests fuzz ParseRequest).
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka error codes the node program answers with.
const (
	ErrNone                 int16 = 0
	ErrUnknownServerError   int16 = -1
	ErrOffsetOutOfRange     int16 = 1
	ErrCorruptMessage       int16 = 2
	ErrUnknownTopicOrPart   int16 = 3
	ErrLeaderNotAvailable   int16 = 5
	ErrNotLeaderForPart     int16 = 6
	ErrRequestTimedOut      int16 = 7
	ErrMessageTooLarge      int16 = 10
	ErrStaleControllerEpoch int16 = 11
	ErrNotEnoughReplicas    int16 = 19
	ErrNotEnoughReplicasAA  int16 = 20 // NOT_ENOUGH_REPLICAS_AFTER_APPEND
	ErrInvalidRequiredAcks  int16 = 21
	ErrUnsupportedVersion   int16 = 35
	ErrNotController        int16 = 41
	ErrKafkaStorageError    int16 = 56
	ErrFencedLeaderEpoch    int16 = 74
	ErrUnknownLeaderEpoch   int16 = 76
	ErrStaleBrokerEpoch     int16 = 77
)

// ApiVersionsKey is the one API whose response header is always v0 and whose
// unsupported versions are answered rather than dropped.
const ApiVersionsKey int16 = 18

// MaxFrameSize bounds a request frame; Kafka's socket.request.max.bytes
// defaults to 100 MiB, a node program in a test needs far less.
const MaxFrameSize = 64 << 20

// ErrUnsupported reports an API key or version the server does not serve.
var ErrUnsupported = errors.New("unsupported api key or version")

// RequestHeader is a parsed Kafka request header (v0, v1 or v2).
type RequestHeader struct {
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	ClientID      *string
}

// Request is one decoded request frame.
type Request struct {
	Header RequestHeader
	// Body is the decoded request; nil when the key or version is unknown
	// (then Err is ErrUnsupported).
	Body kmsg.Request
}

// reader is a bounds-checked cursor; every read after an overrun yields zero.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) need(n int) bool {
	if r.bad || n < 0 || len(r.b) < n {
		r.bad = true
		return false
	}
	return true
}

func (r *reader) int16() int16 {
	if !r.need(2) {
		return 0
	}
	v := int16(binary.BigEndian.Uint16(r.b))
	r.b = r.b[2:]
	return v
}

func (r *reader) int32() int32 {
	if !r.need(4) {
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b))
	r.b = r.b[4:]
	return v
}

func (r *reader) uvarint() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) nullableString() *string {
	n := r.int16()
	if r.bad || n < 0 {
		return nil
	}
	if !r.need(int(n)) {
		return nil
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return &s
}

// skipTags skips a tagged-field section (KIP-482): a count, then per field a
// tag and a size-prefixed value. The header has no tags the node uses.
func (r *reader) skipTags() {
	n := r.uvarint()
	if n > uint64(len(r.b)) { // each field takes at least two bytes
		r.bad = true
		return
	}
	for i := uint64(0); i < n && !r.bad; i++ {
		r.uvarint() // tag
		size := r.uvarint()
		if size > uint64(len(r.b)) {
			r.bad = true
			return
		}
		r.b = r.b[size:]
	}
}

// ParseRequest decodes one request frame (without its 4-byte size prefix).
// supported says whether the server serves key at version; a request it does
// not serve still yields its header (so an answer can carry the correlation
// id) with Body nil and an error wrapping ErrUnsupported.
func ParseRequest(frame []byte, supported func(key, version int16) bool) (Request, error) {
	r := &reader{b: frame}
	var h RequestHeader
	h.APIKey = r.int16()
	h.APIVersion = r.int16()
	h.CorrelationID = r.int32()
	if r.bad {
		return Request{Header: h}, fmt.Errorf("request header: %d bytes is too short", len(frame))
	}
	// ControlledShutdown v0 used request header v0, which has no client id.
	if !(h.APIKey == 7 && h.APIVersion == 0) {
		h.ClientID = r.nullableString()
	}
	if r.bad {
		return Request{Header: h}, fmt.Errorf("request header (api %d v%d, correlation %d): bad client id", h.APIKey, h.APIVersion, h.CorrelationID)
	}
	proto := kmsg.RequestForKey(h.APIKey)
	if proto == nil || h.APIVersion < 0 || h.APIVersion > proto.MaxVersion() || (supported != nil && !supported(h.APIKey, h.APIVersion)) {
		return Request{Header: h}, fmt.Errorf("api %d (%s) v%d: %w", h.APIKey, kmsg.NameForKey(h.APIKey), h.APIVersion, ErrUnsupported)
	}
	proto.SetVersion(h.APIVersion)
	if proto.IsFlexible() {
		r.skipTags()
		if r.bad {
			return Request{Header: h}, fmt.Errorf("%s v%d correlation %d: bad header tagged fields", kmsg.NameForKey(h.APIKey), h.APIVersion, h.CorrelationID)
		}
	}
	if err := proto.ReadFrom(r.b); err != nil {
		return Request{Header: h}, fmt.Errorf("%s v%d correlation %d: body: %w", kmsg.NameForKey(h.APIKey), h.APIVersion, h.CorrelationID, err)
	}
	return Request{Header: h, Body: proto}, nil
}

// AppendResponse appends a full response frame (size prefix included) for
// resp answering correlationID. ApiVersions always uses response header v0
// so clients can parse it before they know what the server speaks.
func AppendResponse(dst []byte, resp kmsg.Response, correlationID int32) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != ApiVersionsKey {
		dst = append(dst, 0) // no header tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// ParseResponse decodes a response frame (without size prefix) for req, which
// must carry the version it was sent with.
func ParseResponse(frame []byte, req kmsg.Request, wantCorrelation int32) (kmsg.Response, error) {
	r := &reader{b: frame}
	corr := r.int32()
	if r.bad {
		return nil, fmt.Errorf("response header: too short")
	}
	if corr != wantCorrelation {
		return nil, fmt.Errorf("response correlation id %d, want %d", corr, wantCorrelation)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && resp.Key() != ApiVersionsKey {
		r.skipTags()
		if r.bad {
			return nil, fmt.Errorf("%s response: bad header tagged fields", kmsg.NameForKey(req.Key()))
		}
	}
	if err := resp.ReadFrom(r.b); err != nil {
		return nil, fmt.Errorf("%s v%d response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp, nil
}
