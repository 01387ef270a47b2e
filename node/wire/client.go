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
type Client struct {
	mu       sync.Mutex
	addr     string
	clientID string
	conn     net.Conn
	corr     int32
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

// Close drops the connection.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// Request sends req (at the version it carries) and waits for its response
// or ctx. Any error drops the connection so the next call redials.
func (c *Client) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp, err := c.request(ctx, req)
	if err != nil && c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
	return resp, err
}

func (c *Client) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if c.conn == nil {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", c.addr, err)
		}
		c.conn = conn
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	c.conn.SetDeadline(deadline)
	// Unblock the read if ctx is cancelled before the deadline.
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	c.corr++
	corr := c.corr
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(c.clientID))
	if _, err := c.conn.Write(f.AppendRequest(nil, req, corr)); err != nil {
		return nil, fmt.Errorf("write %s to %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	var sizeBuf [4]byte
	if _, err := io.ReadFull(c.conn, sizeBuf[:]); err != nil {
		return nil, fmt.Errorf("read %s response from %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 4 || size > MaxFrameSize {
		return nil, fmt.Errorf("%s response from %s: frame size %d out of range", kmsg.NameForKey(req.Key()), c.addr, size)
	}
	frame := make([]byte, size)
	if _, err := io.ReadFull(c.conn, frame); err != nil {
		return nil, fmt.Errorf("read %s response from %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	return ParseResponse(frame, req, corr)
}
