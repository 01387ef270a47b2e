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

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// skipTags skips a tagged-field section (KIP-482): a count, then per field a
// tag and a size-prefixed value. The header has no tags the node uses.
func skipTags(r *kbin.Reader) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		r.Uvarint() // tag
		r.Span(int(r.Uvarint()))
	}
}

// ParseRequest decodes one request frame (without its 4-byte size prefix).
// supported says whether the server serves key at version; a request it does
// not serve still yields its header (so an answer can carry the correlation
// id) with Body nil and an error wrapping ErrUnsupported.
func ParseRequest(frame []byte, supported func(key, version int16) bool) (Request, error) {
	r := &kbin.Reader{Src: frame}
	var h RequestHeader
	h.APIKey = r.Int16()
	h.APIVersion = r.Int16()
	h.CorrelationID = r.Int32()
	if !r.Ok() {
		return Request{Header: h}, fmt.Errorf("request header: %d bytes is too short", len(frame))
	}
	// ControlledShutdown v0 used request header v0, which has no client id.
	if !(h.APIKey == 7 && h.APIVersion == 0) {
		h.ClientID = r.NullableString()
	}
	if !r.Ok() {
		return Request{Header: h}, fmt.Errorf("request header (api %d v%d, correlation %d): bad client id", h.APIKey, h.APIVersion, h.CorrelationID)
	}
	proto := kmsg.RequestForKey(h.APIKey)
	if proto == nil || h.APIVersion < 0 || h.APIVersion > proto.MaxVersion() || (supported != nil && !supported(h.APIKey, h.APIVersion)) {
		return Request{Header: h}, fmt.Errorf("api %d (%s) v%d: %w", h.APIKey, kmsg.NameForKey(h.APIKey), h.APIVersion, ErrUnsupported)
	}
	proto.SetVersion(h.APIVersion)
	if proto.IsFlexible() {
		skipTags(r)
		if !r.Ok() {
			return Request{Header: h}, fmt.Errorf("%s v%d correlation %d: bad header tagged fields", kmsg.NameForKey(h.APIKey), h.APIVersion, h.CorrelationID)
		}
	}
	if err := proto.ReadFrom(r.Src); err != nil {
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
	r := &kbin.Reader{Src: frame}
	corr := r.Int32()
	if !r.Ok() {
		return nil, fmt.Errorf("response header: too short")
	}
	if corr != wantCorrelation {
		return nil, fmt.Errorf("response correlation id %d, want %d", corr, wantCorrelation)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && resp.Key() != ApiVersionsKey {
		skipTags(r)
		if !r.Ok() {
			return nil, fmt.Errorf("%s response: bad header tagged fields", kmsg.NameForKey(req.Key()))
		}
	}
	if err := resp.ReadFrom(r.Src); err != nil {
		return nil, fmt.Errorf("%s v%d response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp, nil
}
