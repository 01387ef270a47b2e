package wire

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client is one connection to a Kafka-protocol server, used for one request
// at a time (the controller's per-broker send queue never pipelines, as
// ControllerChannelManager's RequestSendThread does not).
//
// Close interrupts a request in flight (its dial, write or read) instead of
// waiting for it: the controller's event loop closes a broker's client when
// the broker leaves, and a peer that stopped answering (a SIGKILLed
// container's address drops packets, a cut link) must not make that wait for
// the request's own deadline.
type Client struct {
	addr     string
	clientID string

	// reqMu serialises requests; it is held across network I/O, so nothing
	// else may wait on it.
	reqMu sync.Mutex

	// mu guards the fields below and is never held across network I/O.
	mu     sync.Mutex
	conn   net.Conn
	corr   int32
	cancel context.CancelFunc // of the request in flight, nil if none
}

// NewClient returns a client for addr that dials lazily.
func NewClient(addr, clientID string) *Client { return &Client{addr: addr, clientID: clientID} }

// Addr is the server address.
func (c *Client) Addr() string { return c.addr }

// NextCorrelationID is the id the next Request will carry (for logging a
// request before it is sent; the client is used by one goroutine at a time).
func (c *Client) NextCorrelationID() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.corr + 1
}

// Close drops the connection and makes a request in flight fail at once. It
// never waits for network I/O. A later Request dials again.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// Request sends req (at the version it carries) and waits for its response,
// ctx or Close. Any error drops the connection so the next call redials.
func (c *Client) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.reqMu.Lock()
	defer c.reqMu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.mu.Lock()
	c.cancel = cancel
	conn := c.conn
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.cancel = nil
		c.mu.Unlock()
	}()

	if conn == nil {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", c.addr, err)
		}
		c.mu.Lock()
		if ctx.Err() != nil {
			// Closed (or cancelled) while dialling: do not keep a
			// connection nobody will close.
			c.mu.Unlock()
			nc.Close()
			return nil, fmt.Errorf("dial %s: %w", c.addr, ctx.Err())
		}
		c.conn = nc
		c.mu.Unlock()
		conn = nc
	}
	c.mu.Lock()
	c.corr++
	corr := c.corr
	c.mu.Unlock()

	resp, err := c.roundTrip(ctx, conn, req, corr)
	if err != nil {
		c.mu.Lock()
		if c.conn == conn {
			c.conn = nil
		}
		c.mu.Unlock()
		conn.Close()
	}
	return resp, err
}

// roundTrip writes one request on conn and reads its response. It touches
// only conn, never c.conn: Close may clear that concurrently.
func (c *Client) roundTrip(ctx context.Context, conn net.Conn, req kmsg.Request, corr int32) (kmsg.Response, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	conn.SetDeadline(deadline)
	// Unblock the write or read if ctx ends (cancel, Close) before the
	// deadline. The callback may still run after roundTrip returned, so it
	// must use this conn, not the field.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(c.clientID))
	if _, err := conn.Write(f.AppendRequest(nil, req, corr)); err != nil {
		return nil, fmt.Errorf("write %s to %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	var sizeBuf [4]byte
	if _, err := io.ReadFull(conn, sizeBuf[:]); err != nil {
		return nil, fmt.Errorf("read %s response from %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 4 || size > MaxFrameSize {
		return nil, fmt.Errorf("%s response from %s: frame size %d out of range", kmsg.NameForKey(req.Key()), c.addr, size)
	}
	frame := make([]byte, size)
	if _, err := io.ReadFull(conn, frame); err != nil {
		return nil, fmt.Errorf("read %s response from %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	return ParseResponse(frame, req, corr)
}
