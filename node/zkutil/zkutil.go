// Package zkutil owns the node program's ZooKeeper session: connecting with a
// session-state callback (go-zookeeper's event channel drops events), bounded
// calls (the library has no per-call timeout), re-issue of calls lost to a
// connection loss until the session is back (as
// KafkaZkClient.retryRequestsUntilConnected does), and the mapping of errors
// to history outcomes.
//
// It knows nothing about Kafka's znodes; zkdata does.
package zkutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/zkdial"
)

// ErrTimeout means a call did not return within the request timeout: its
// outcome is unknown (it may still take effect).
var ErrTimeout = errors.New("zookeeper call timed out (outcome unknown)")

// Session is one go-zookeeper connection. go-zookeeper re-establishes it
// transparently; after an expiry the new connection has a NEW session and
// every ephemeral of the old one is gone, which SessionID reveals.
type Session struct {
	Conn           *zk.Conn
	RequestTimeout time.Duration

	mu        sync.Mutex
	listeners []func(zk.Event)
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// Connect starts a session. Listeners added later hear every state event.
func Connect(servers []string, sessionTimeout, requestTimeout time.Duration) (*Session, error) {
	s := &Session{RequestTimeout: requestTimeout}
	conn, _, err := zk.Connect(servers, sessionTimeout,
		zk.WithLogger(quietLogger{}),
		zk.WithEventCallback(s.dispatch),
		zk.WithHostProvider(newStartProvider(firstRoundPause)),
		// A Kafka broker's Java client gives a server session timeout /
		// servers to answer the handshake, then tries the next; without
		// the bound a broker that reached a stopped server waited 20 s
		// (go-zookeeper's ten read timeouts at a 3 s session).
		zk.WithDialer(zkdial.BoundedHandshake(zkdial.Handshake(sessionTimeout, len(servers)))))
	if err != nil {
		return nil, fmt.Errorf("zookeeper connect %v: %w", servers, err)
	}
	s.Conn = conn
	return s, nil
}

// firstRoundPause is the pause between rounds over the servers until the
// first session: a broker starts beside the ensemble and finds every server
// refusing until one serves.
const firstRoundPause = 50 * time.Millisecond

// startProvider is go-zookeeper's DNSHostProvider with a short pause between
// rounds over the servers until the first session is established, and the
// library's own second after that. go-zookeeper waits a second after every
// round in which no server took the connection; at start-up that second
// is spent after the ensemble is already serving (a broker registered 0.5 to
// 1 s after ZooKeeper was ready). Once a session exists, the second stays:
// a broker cut off from the ensemble by a fault must not spin on it.
type startProvider struct {
	*zk.DNSHostProvider
	pause time.Duration

	mu        sync.Mutex
	connected bool
}

func newStartProvider(pause time.Duration) *startProvider {
	return &startProvider{DNSHostProvider: zk.NewDNSHostProvider(), pause: pause}
}

// Next implements zk.HostProvider. Before the first session a round's end
// pauses here and is not reported, so the library neither waits its second
// nor fails queued requests with ErrNoServer (none are sent before the
// session: Connect's callers wait for it).
func (p *startProvider) Next() (string, bool) {
	server, retryStart := p.DNSHostProvider.Next()
	p.mu.Lock()
	connected := p.connected
	p.mu.Unlock()
	if retryStart && !connected {
		time.Sleep(p.pause)
		return server, false
	}
	return server, retryStart
}

// Connected implements zk.HostProvider.
func (p *startProvider) Connected() {
	p.mu.Lock()
	p.connected = true
	p.mu.Unlock()
	p.DNSHostProvider.Connected()
}

// OnEvent adds a listener for session and watch events delivered through the
// callback. It must not block: go-zookeeper calls it on its receive loop.
func (s *Session) OnEvent(fn func(zk.Event)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners = append(s.listeners, fn)
}

func (s *Session) dispatch(ev zk.Event) {
	s.mu.Lock()
	ls := append([]func(zk.Event){}, s.listeners...)
	s.mu.Unlock()
	for _, fn := range ls {
		fn(ev)
	}
}

// WaitSession waits until the connection has a session.
func (s *Session) WaitSession(ctx context.Context) error {
	for s.Conn.State() != zk.StateHasSession {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for a zookeeper session (state %s): %w", s.Conn.State(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// Close ends the session (its ephemerals go at once).
func (s *Session) Close() { s.Conn.Close() }

// Call runs fn bounded by the request timeout and ctx. On timeout fn keeps
// running in the background until go-zookeeper answers or the connection
// closes; the caller gets ErrTimeout and must treat the outcome as unknown.
func Call[T any](ctx context.Context, s *Session, fn func(*zk.Conn) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, s.RequestTimeout)
	defer cancel()
	return Await(ctx, nil, func() (T, error) { return fn(s.Conn) })
}

// Retriable reports whether err means the request was lost with its
// connection or its session (ConnectionLost, or an expiry), so the data
// plane's callers may send it again on the current connection.
func Retriable(err error) bool {
	return ConnectionLost(err) || errors.Is(err, zk.ErrSessionExpired)
}

// Outcome maps a ZooKeeper error to a history outcome.
func Outcome(err error) string {
	switch {
	case err == nil:
		return history.ZKOK
	case errors.Is(err, zk.ErrBadVersion):
		return history.ZKBadVersion
	case errors.Is(err, zk.ErrNoNode):
		return history.ZKNoNode
	case errors.Is(err, zk.ErrNodeExists):
		return history.ZKNodeExists
	case errors.Is(err, ErrTimeout), Retriable(err):
		return history.ZKConnectionLoss
	default:
		return history.ZKError
	}
}

// MultiFailure returns the index of the first failed op of a Multi (or -1)
// and its error.
func MultiFailure(res []zk.MultiResponse, err error) (int, error) {
	for i, r := range res {
		if r.Error != nil {
			return i, r.Error
		}
	}
	if err != nil {
		return -1, err
	}
	return -1, nil
}

// EnsurePath creates path and its parents (persistent, empty) if missing,
// on the session's connection.
func EnsurePath(ctx context.Context, s *Session, path string) error {
	return EnsurePathOn(ctx, s.Conn, path)
}

// EnsurePathOn is KafkaZkClient.makeSurePersistentPathExists: each missing
// ancestor is created, every request retried until connected.
func EnsurePathOn[C PathConn](ctx context.Context, c C, path string) error {
	if path == "" || path == "/" {
		return nil
	}
	for i := 1; i <= len(path); i++ {
		if i == len(path) || path[i] == '/' {
			p := path[:i]
			// Read first, as Kafka's makeSurePersistentPathExists does: a
			// create of an existing znode is still a write through the
			// ZooKeeper leader, and a write brings the session's server up
			// to date, so it would hide what later reads see (KAFKA-16667).
			exists, _, err := UntilConnected(ctx, c, false, func(c C, _ int) (bool, error) {
				ok, _, err := c.Exists(p)
				return ok, err
			})
			if err == nil && exists {
				continue
			}
			_, _, err = UntilConnected(ctx, c, false, func(c C, _ int) (string, error) {
				return c.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
			})
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return fmt.Errorf("create %s: %w", p, err)
			}
		}
	}
	return nil
}

// Conn is what UntilConnected needs of a connection: *zk.Conn, or a fake in
// tests.
type Conn interface {
	State() zk.State
	SessionID() int64
}

// ErrSessionLost wraps zk.ErrSessionExpired: the session a request was
// issued on ended before it was answered (or before it could be re-issued).
var ErrSessionLost = fmt.Errorf("zookeeper session ended before the request was answered: %w", zk.ErrSessionExpired)

// ConnectionLost reports whether err means the connection under a request
// broke (Kafka's CONNECTIONLOSS): the request may or may not have executed,
// and the session may still be alive. go-zookeeper hands a request the raw
// socket error when the connection breaks under it, not ErrConnectionClosed.
func ConnectionLost(err error) bool {
	if errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionMoved) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// waitPoll is how often UntilConnected looks at the connection state while
// it waits for a session.
const waitPoll = 20 * time.Millisecond

// UntilConnected is KafkaZkClient.retryRequestsUntilConnected: fn is issued,
// and re-issued each time its connection is lost, after
// ZooKeeperClient.waitUntilConnected has seen the session again. There is no
// time limit: a controller cut off from ZooKeeper blocks here until the
// connection comes back or the session is found expired, as Kafka's
// controller thread does. Expiry ends it with an error wrapping
// zk.ErrSessionExpired: the request belonged to the old session (Kafka's
// ZooKeeperClientExpiredException), and the caller's event is abandoned.
// acrossSessions keeps retrying on the new session instead, as the
// pre-2.0 ZkClient.retryUntilConnected did (it caught SessionExpired too).
//
// fn must be safe to re-issue: a conditional write whose first answer was
// lost may have executed, so its caller decides what a second answer of
// BADVERSION or NODEEXISTS means, as Kafka's callers do.
//
// A session found expired also ends a call still waiting for its answer,
// and a wait for a session while the connection is in StateExpired
// (ZooKeeperClient.waitUntilConnected throws ZooKeeperClientExpiredException
// in state CLOSED): the controller's expiry handler holds go-zookeeper in
// that state until the controller has resigned (Controller.SessionExpired),
// and a request queued while disconnected is never answered before the
// next session, so waiting for either would deadlock.
//
// A call that ctx abandons keeps running until go-zookeeper answers it (its
// receive timeout bounds a silent server). attempt counts from 1.
func UntilConnected[C Conn, T any](ctx context.Context, c C, acrossSessions bool, fn func(c C, attempt int) (T, error)) (T, int, error) {
	var zero T
	sid, err := awaitSession(ctx, c, acrossSessions)
	if err != nil {
		return zero, 0, err
	}
	for attempt := 1; ; attempt++ {
		var lost func() bool
		if !acrossSessions {
			lost = func() bool { return c.State() == zk.StateExpired || c.SessionID() != sid }
		}
		v, err := Await(ctx, lost, func() (T, error) { return fn(c, attempt) })
		if errors.Is(err, errAbandoned) {
			return v, attempt, fmt.Errorf("%w: 0x%x, with a request unanswered", ErrSessionLost, sid)
		}
		if err == nil || ctx.Err() != nil {
			return v, attempt, err
		}
		expired := errors.Is(err, zk.ErrSessionExpired)
		if !expired && !ConnectionLost(err) {
			return v, attempt, err
		}
		if expired && !acrossSessions {
			return v, attempt, fmt.Errorf("%w (%w)", ErrSessionLost, err)
		}
		now, werr := awaitSession(ctx, c, acrossSessions)
		if werr != nil {
			return v, attempt, fmt.Errorf("%w (while waiting to re-issue after %w)", werr, err)
		}
		if now != sid && !acrossSessions {
			return v, attempt, fmt.Errorf("%w: 0x%x replaced by 0x%x (%w)", ErrSessionLost, sid, now, err)
		}
		sid = now
	}
}

// awaitSession is ZooKeeperClient.waitUntilConnected: it returns the session
// id once the connection has a session, ctx's error, or (unless
// acrossSessions) ErrSessionLost while the connection is in StateExpired.
func awaitSession[C Conn](ctx context.Context, c C, acrossSessions bool) (int64, error) {
	for {
		st := c.State()
		if st == zk.StateHasSession {
			break
		}
		if st == zk.StateExpired && !acrossSessions {
			return 0, fmt.Errorf("%w: found expired while waiting for a connection", ErrSessionLost)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("waiting for a zookeeper session (state %s): %w", c.State(), ctx.Err())
		case <-time.After(waitPoll):
		}
	}
	return c.SessionID(), nil
}

// errAbandoned is Await's answer when lost reported the session gone.
var errAbandoned = errors.New("zookeeper request abandoned: its session ended")

// Await runs fn and returns its answer, ErrTimeout wrapping ctx's error if
// ctx ends first, or errAbandoned once lost (polled; nil: never) reports
// true. fn then finishes in the background: go-zookeeper's requests take no
// context, and its answer (from ZooKeeper, or the client's own on a lost
// connection) is dropped.
func Await[T any](ctx context.Context, lost func() bool, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn()
		ch <- result{v, err}
	}()
	var tick <-chan time.Time
	if lost != nil {
		t := time.NewTicker(waitPoll)
		defer t.Stop()
		tick = t.C
	}
	var zero T
	for {
		select {
		case r := <-ch:
			return r.v, r.err
		case <-ctx.Done():
			return zero, fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
		case <-tick:
			if lost() {
				return zero, errAbandoned
			}
		}
	}
}

// PathConn is what EnsurePathOn needs of a connection.
type PathConn interface {
	Conn
	Exists(path string) (bool, *zk.Stat, error)
	Create(path string, data []byte, flags int32, acl []zk.ACL) (string, error)
}
