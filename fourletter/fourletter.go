// Package fourletter owns ZooKeeper's four-letter words as the harness uses
// them: sending one to a server's client port and reading `srvr` (the
// server's mode and the last zxid it applied) and `cons` (its client
// connections). cluster/ waits for an ensemble with it, nemesis/ finds which
// server serves whose session and how far a slowed server lags, scenarios/
// checks the same in their drivers. It knows nothing of containers, brokers
// or faults: it speaks to an address.
package fourletter

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Ask sends word to the ZooKeeper server at addr (ip:port) and returns its
// whole reply; the server closes the connection after answering. The
// servers must allow the word (zoo.cfg 4lw.commands.whitelist).
func Ask(ctx context.Context, addr, word string, timeout time.Duration) (string, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", word, addr, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", fmt.Errorf("%s %s: %w", word, addr, err)
	}
	if _, err := conn.Write([]byte(word)); err != nil {
		return "", fmt.Errorf("%s %s: %w", word, addr, err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", word, addr, err)
	}
	return string(b), nil
}

// Status is what a server says of itself through `srvr`.
type Status struct {
	_ struct{}

	Mode string // "leader", "follower", "standalone", "observer"
	// Zxid is the last transaction the server applied: a follower that
	// lags its leader answers reads as of this zxid.
	Zxid int64
}

// Srvr asks the server at addr for `srvr`. A server that is paused,
// partitioned or not in a quorum is an error: ZooKeeper answers "This
// ZooKeeper instance is not currently serving requests" then.
func Srvr(ctx context.Context, addr string, timeout time.Duration) (Status, error) {
	out, err := Ask(ctx, addr, "srvr", timeout)
	if err != nil {
		return Status{}, err
	}
	st, err := ParseSrvr(out)
	if err != nil {
		return Status{}, fmt.Errorf("srvr %s: %w", addr, err)
	}
	return st, nil
}

// ParseSrvr reads a `srvr` reply.
func ParseSrvr(out string) (Status, error) {
	var st Status
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "Mode: "):
			st.Mode = strings.TrimSpace(strings.TrimPrefix(line, "Mode: "))
		case strings.HasPrefix(line, "Zxid: "):
			z, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(line, "Zxid: ")), "0x"), 16, 64)
			if err != nil {
				return Status{}, fmt.Errorf("bad zxid in %q: %w", line, err)
			}
			st.Zxid = z
		case strings.Contains(line, "not currently serving"):
			return Status{}, fmt.Errorf("not serving requests")
		}
	}
	if st.Mode == "" {
		return Status{}, fmt.Errorf("no Mode in reply %q", firstLine(out))
	}
	return st, nil
}

// Conn is one client connection a server lists in `cons`.
type Conn struct {
	_ struct{}

	Addr netip.AddrPort // the client's address (IPv4-mapped addresses unmapped)
	// Session: the handshake is done and the connection carries a session
	// (the line has a sid); a connection still in its handshake has none.
	Session bool
	// Established is when the server established the connection (est=,
	// ms since the epoch; 0 if absent): a client that moved is still
	// listed by a server cut off from it, and the later one is current.
	Established int64
}

// Cons asks the server at addr for its client connections.
func Cons(ctx context.Context, addr string, timeout time.Duration) ([]Conn, error) {
	out, err := Ask(ctx, addr, "cons", timeout)
	if err != nil {
		return nil, err
	}
	return ParseCons(out), nil
}

// ParseCons reads a `cons` reply: one connection a line,
// " /10.0.0.5:43122[1](queued=0,recved=4,sent=4,sid=0x...,...)". Lines
// that are not connections (a server not serving says so in words) are
// skipped.
func ParseCons(out string) []Conn {
	var conns []Conn
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "/")
		if !ok {
			continue
		}
		// The address ends where "[interest ops](" begins; an IPv6
		// address has brackets of its own.
		end := strings.Index(rest, "](")
		if end < 0 {
			continue
		}
		end = strings.LastIndex(rest[:end], "[")
		if end < 0 {
			continue
		}
		ap, err := netip.ParseAddrPort(rest[:end])
		if err != nil {
			continue
		}
		c := Conn{Addr: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), Session: strings.Contains(rest, "sid=0x")}
		for _, kv := range strings.Split(strings.TrimSuffix(rest[strings.Index(rest, "](")+2:], ")"), ",") {
			if v, ok := strings.CutPrefix(kv, "est="); ok {
				c.Established, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		conns = append(conns, c)
	}
	return conns
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
