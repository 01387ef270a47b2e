package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"github.com/twmb/franz-go/pkg/kerr"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve starts a server with an UpdateMetadata handler (versions 0..6) that
// echoes the controller epoch as the error code, so a test can see the body
// was decoded.
func serve(t *testing.T, onError ...func(net.Addr, *RequestHeader, error)) (*Server, string) {
	t.Helper()
	s := NewServer()
	if len(onError) > 0 {
		s.OnError = onError[0]
	}
	s.Handle(6, 0, 6, func(_ context.Context, _ *ConnInfo, _ RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		r := kmsg.NewPtrUpdateMetadataResponse()
		r.ErrorCode = int16(req.(*kmsg.UpdateMetadataRequest).ControllerEpoch)
		return r, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(ln) }()
	t.Cleanup(func() { s.Close(); <-done })
	return s, ln.Addr().String()
}

func TestRoundTripEveryVersion(t *testing.T) {
	_, addr := serve(t)
	c := NewClient(addr, "test")
	defer c.Close()
	// v0-v5 use the v1 header, v6 is flexible (v2 header with tags).
	for v := int16(0); v <= 6; v++ {
		req := kmsg.NewPtrUpdateMetadataRequest()
		req.SetVersion(v)
		req.ControllerEpoch = 40 + int32(v)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := c.Request(ctx, req)
		cancel()
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if got := resp.(*kmsg.UpdateMetadataResponse).ErrorCode; got != 40+int16(v) {
			t.Fatalf("v%d: echoed %d", v, got)
		}
	}
}

func TestApiVersionsListsRoutes(t *testing.T) {
	_, addr := serve(t)
	c := NewClient(addr, "test")
	defer c.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "t", "1"
	resp, err := c.Request(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[int16][2]int16{}
	for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
		keys[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if keys[6] != [2]int16{0, 6} || keys[18] != [2]int16{0, 3} {
		t.Fatalf("api keys %v", keys)
	}
}

// A version registered unadvertised is served but ApiVersions names only
// the advertised range, so a client picks no broker-only version.
func TestUnadvertisedVersionsServedNotListed(t *testing.T) {
	s, addr := serve(t)
	s.HandleUnadvertised(6, 0, 3, 6, func(_ context.Context, _ *ConnInfo, _ RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		r := kmsg.NewPtrUpdateMetadataResponse()
		r.ErrorCode = int16(req.(*kmsg.UpdateMetadataRequest).ControllerEpoch)
		return r, nil
	})
	c := NewClient(addr, "test")
	defer c.Close()
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
	resp, err := c.Request(context.Background(), av)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == 6 && k.MaxVersion != 3 {
			t.Fatalf("UpdateMetadata advertised up to v%d, want v3", k.MaxVersion)
		}
	}
	req := kmsg.NewPtrUpdateMetadataRequest()
	req.SetVersion(6)
	req.ControllerEpoch = 9
	got, err := c.Request(context.Background(), req)
	if err != nil {
		t.Fatalf("unadvertised v6: %v", err)
	}
	if code := got.(*kmsg.UpdateMetadataResponse).ErrorCode; code != 9 {
		t.Fatalf("unadvertised v6 echoed %d", code)
	}
}

// rawRequest writes a hand-made frame and returns the response frame, or
// io.EOF when the server closed the connection.
func rawRequest(t *testing.T, addr string, frame []byte) ([]byte, error) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	out := binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
	if _, err := conn.Write(append(out, frame...)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, err
	}
	resp := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(conn, resp)
	return resp, err
}

func header(key, version int16, corr int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
}

// errorCount counts the errors a server reports (report is its OnError).
type errorCount struct {
	mu sync.Mutex
	n  int
}

func (c *errorCount) report(net.Addr, *RequestHeader, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *errorCount) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func TestUnsupportedRequestsNeverHang(t *testing.T) {
	var reported errorCount
	_, addr := serve(t, reported.report)

	// ApiVersions at a version we do not speak: v0 answer with 35.
	resp, err := rawRequest(t, addr, append(header(18, 99, 7), 0))
	if err != nil {
		t.Fatalf("ApiVersions v99: %v", err)
	}
	if corr := int32(binary.BigEndian.Uint32(resp)); corr != 7 {
		t.Fatalf("correlation %d", corr)
	}
	av := kmsg.NewPtrApiVersionsResponse()
	av.SetVersion(0)
	if err := av.ReadFrom(resp[4:]); err != nil || av.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("ApiVersions v99 answer: %+v %v", av, err)
	}

	tests := []struct {
		name  string
		frame []byte
	}{
		{"unknown api key", header(9999, 0, 1)},
		{"unregistered api", header(0, 3, 2)},    // Produce: not served in part 1
		{"version above range", header(6, 7, 3)}, // UpdateMetadata v7
		{"truncated body", header(6, 6, 4)},      // flexible, no tags, no body
		{"short header", []byte{0, 6, 0}},        // below 8 bytes
		{"bad client id length", append(header(6, 0, 5)[:8], 0x7f, 0xff)},
	}
	for _, tt := range tests {
		if _, err := rawRequest(t, addr, tt.frame); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			var ne net.Error
			if !errors.As(err, &ne) || ne.Timeout() {
				t.Errorf("%s: want the connection closed, got %v", tt.name, err)
			}
		}
	}
	time.Sleep(50 * time.Millisecond) // the server reports after closing
	if n := reported.count(); n < len(tests) {
		t.Errorf("only %d of %d bad requests were reported", n, len(tests))
	}
}

func TestParseRequestFlexibleTags(t *testing.T) {
	req := kmsg.NewPtrLeaderAndISRRequest()
	req.SetVersion(4)
	req.ControllerEpoch, req.BrokerEpoch = 5, 77
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, 9)[4:]
	// Insert one unknown header tag (tag 3, 2 bytes) where the formatter
	// wrote "no tags": after key, version, correlation, client id "c".
	hdrLen := 2 + 2 + 4 + 2 + 1
	tagged := append(append([]byte{}, frame[:hdrLen]...), 1, 3, 2, 0xaa, 0xbb)
	tagged = append(tagged, frame[hdrLen+1:]...)
	for name, f := range map[string][]byte{"plain": frame, "with header tag": tagged} {
		got, err := ParseRequest(f, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		l := got.Body.(*kmsg.LeaderAndISRRequest)
		if got.Header.CorrelationID != 9 || *got.Header.ClientID != "c" || l.ControllerEpoch != 5 || l.BrokerEpoch != 77 {
			t.Fatalf("%s: %+v %+v", name, got.Header, l)
		}
	}
}

func TestControlledShutdownV0HasNoClientID(t *testing.T) {
	// Request header v0: key, version, correlation id, then the body
	// (BrokerID) with no client id in between.
	frame := binary.BigEndian.AppendUint16(nil, 7)
	frame = binary.BigEndian.AppendUint16(frame, 0)
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint32(frame, 3)
	got, err := ParseRequest(frame, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.ClientID != nil || got.Body.(*kmsg.ControlledShutdownRequest).BrokerID != 3 {
		t.Fatalf("%+v", got)
	}
}

func TestHandlerPanicClosesOnlyTheConnection(t *testing.T) {
	var reported errorCount
	s, addr := serve(t, reported.report)
	s.Handle(5, 0, 3, func(context.Context, *ConnInfo, RequestHeader, kmsg.Request) (kmsg.Response, error) {
		panic("boom")
	})
	c := NewClient(addr, "t")
	defer c.Close()
	req := kmsg.NewPtrStopReplicaRequest()
	req.SetVersion(3)
	if _, err := c.Request(context.Background(), req); err == nil {
		t.Fatal("want the connection closed")
	}
	// The server still serves.
	um := kmsg.NewPtrUpdateMetadataRequest()
	um.SetVersion(6)
	if _, err := c.Request(context.Background(), um); err != nil {
		t.Fatalf("after a handler panic: %v", err)
	}
	if reported.count() == 0 {
		t.Fatal("panic not reported")
	}
}

// Every ApiVersions version a client may open with is answered in kind:
// kafka-python starts at v0 (header v1), librdkafka and the Java client at
// v3 (flexible request header v2, response header always v0).
func TestApiVersionsEveryVersion(t *testing.T) {
	_, addr := serve(t)
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "compat", "1.0"
		frame := binary.BigEndian.AppendUint16(nil, 18)
		frame = binary.BigEndian.AppendUint16(frame, uint16(v))
		frame = binary.BigEndian.AppendUint32(frame, uint32(100+v))
		frame = binary.BigEndian.AppendUint16(frame, 6)
		frame = append(frame, "client"...)
		if v >= 3 {
			frame = append(frame, 0) // header tagged fields
		}
		frame = req.AppendTo(frame)
		resp, err := rawRequest(t, addr, frame)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if corr := int32(binary.BigEndian.Uint32(resp)); corr != int32(100+v) {
			t.Fatalf("v%d: correlation %d", v, corr)
		}
		av := kmsg.NewPtrApiVersionsResponse()
		av.SetVersion(v)
		if err := av.ReadFrom(resp[4:]); err != nil || av.ErrorCode != 0 || len(av.ApiKeys) == 0 {
			t.Fatalf("v%d answer: %+v %v", v, av, err)
		}
	}
}
