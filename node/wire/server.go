package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// HandlerFunc serves one request. A nil response sends nothing (Produce with
// acks=0); an error closes the connection, as Kafka does when it cannot
// answer a request.
type HandlerFunc func(ctx context.Context, c *ConnInfo, hdr RequestHeader, req kmsg.Request) (kmsg.Response, error)

// ConnInfo describes the client side of a connection.
type ConnInfo struct {
	Remote net.Addr
}

type route struct {
	min, max int16
	// advertised is the highest version ApiVersions names (max unless
	// HandleUnadvertised set it lower).
	advertised int16
	fn         HandlerFunc
}

// Server accepts Kafka connections and serves requests on each connection in
// order, one at a time (Kafka answers a connection's requests in order too).
type Server struct {
	// OnError, if set, hears about every connection-level problem: a
	// malformed frame, an unsupported request, a handler error.
	OnError func(remote net.Addr, hdr *RequestHeader, err error)
	// IdleTimeout closes connections without a request for that long
	// (0: never).
	IdleTimeout time.Duration

	mu     sync.Mutex
	routes map[int16]route
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// NewServer returns a server that already answers ApiVersions.
func NewServer() *Server {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{routes: map[int16]route{}, conns: map[net.Conn]struct{}{}, ctx: ctx, cancel: cancel}
	s.routes[ApiVersionsKey] = route{0, 3, 3, s.apiVersions}
	return s
}

// Handle registers fn for key at versions [min, max], capped at what kmsg
// can decode.
func (s *Server) Handle(key, min, max int16, fn HandlerFunc) {
	s.HandleUnadvertised(key, min, max, max, fn)
}

// HandleUnadvertised registers fn for key at versions [min, max] but names
// only [min, advertised] in ApiVersions: versions that brokers send each
// other and clients must not pick (Kafka marks such versions broker-only).
func (s *Server) HandleUnadvertised(key, lo, advertised, hi int16, fn HandlerFunc) {
	if proto := kmsg.RequestForKey(key); proto != nil && hi > proto.MaxVersion() {
		hi = proto.MaxVersion()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes[key] = route{lo, hi, min(advertised, hi), fn}
}

// Supports reports whether key at version is served.
func (s *Server) Supports(key, version int16) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.routes[key]
	return ok && version >= r.min && version <= r.max
}

// Serve accepts connections on ln until Close. It returns nil after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("wire: server closed")
	}
	s.ln = ln
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("wire: accept: %w", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, closes every connection and waits for their
// goroutines to finish.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancel()
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func (s *Server) report(remote net.Addr, hdr *RequestHeader, err error) {
	if s.OnError != nil {
		s.OnError(remote, hdr, err)
	}
}

func (s *Server) serveConn(c net.Conn) {
	defer c.Close()
	info := &ConnInfo{Remote: c.RemoteAddr()}
	br := bufio.NewReader(c)
	var sizeBuf [4]byte
	var out []byte
	for {
		if s.IdleTimeout > 0 {
			c.SetReadDeadline(time.Now().Add(s.IdleTimeout))
		}
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.report(info.Remote, nil, fmt.Errorf("read frame size: %w", err))
			}
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size < 8 || size > MaxFrameSize {
			s.report(info.Remote, nil, fmt.Errorf("frame size %d out of range [8, %d]", size, MaxFrameSize))
			return
		}
		frame := make([]byte, size)
		if _, err := io.ReadFull(br, frame); err != nil {
			s.report(info.Remote, nil, fmt.Errorf("read frame of %d bytes: %w", size, err))
			return
		}
		req, err := ParseRequest(frame, s.Supports)
		if err != nil {
			s.report(info.Remote, &req.Header, err)
			if errors.Is(err, ErrUnsupported) && req.Header.APIKey == ApiVersionsKey {
				// KIP-511: answer an ApiVersions we do not speak with v0 and
				// UNSUPPORTED_VERSION so the client can downgrade.
				resp := s.apiVersionsResponse(0)
				resp.ErrorCode = kerr.UnsupportedVersion.Code
				if _, werr := c.Write(AppendResponse(out[:0], resp, req.Header.CorrelationID)); werr != nil {
					return
				}
				continue
			}
			// Kafka closes the connection on a request it cannot parse or
			// does not support; a client that skipped ApiVersions sees EOF,
			// never a hang.
			return
		}
		s.mu.Lock()
		rt := s.routes[req.Header.APIKey]
		s.mu.Unlock()
		resp, err := s.call(rt.fn, info, req)
		if err != nil {
			s.report(info.Remote, &req.Header, fmt.Errorf("handler: %w", err))
			return
		}
		if resp == nil {
			continue
		}
		resp.SetVersion(req.Header.APIVersion)
		out = AppendResponse(out[:0], resp, req.Header.CorrelationID)
		c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write(out); err != nil {
			s.report(info.Remote, &req.Header, fmt.Errorf("write response: %w", err))
			return
		}
	}
}

// call runs a handler, turning a panic into an error: input from the network
// must never take the node down, whatever a handler's bug.
func (s *Server) call(fn HandlerFunc, info *ConnInfo, req Request) (resp kmsg.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, fmt.Errorf("handler panic on %s v%d: %v", kmsg.NameForKey(req.Header.APIKey), req.Header.APIVersion, p)
		}
	}()
	return fn(s.ctx, info, req.Header, req.Body)
}

func (s *Server) apiVersionsResponse(version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(version)
	s.mu.Lock()
	keys := make([]int16, 0, len(s.routes))
	for k := range s.routes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		r := s.routes[k]
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: r.min, MaxVersion: r.advertised})
	}
	s.mu.Unlock()
	return resp
}

func (s *Server) apiVersions(_ context.Context, _ *ConnInfo, hdr RequestHeader, _ kmsg.Request) (kmsg.Response, error) {
	return s.apiVersionsResponse(hdr.APIVersion), nil
}
