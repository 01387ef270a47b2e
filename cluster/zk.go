package cluster

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// ZKStatus is what one ZooKeeper server says of itself through the `srvr`
// four-letter word.
type ZKStatus struct {
	Mode string // "leader", "follower", "standalone", "observer"
	Zxid int64
}

// ZKSrvr asks the server at addr (ip:port) for `srvr` within timeout. A server
// that is paused, partitioned or not yet in a quorum returns an error: ZooKeeper
// answers "This ZooKeeper instance is not currently serving requests" then.
func ZKSrvr(ctx context.Context, addr string, timeout time.Duration) (ZKStatus, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return ZKStatus{}, fmt.Errorf("srvr %s: %w", addr, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return ZKStatus{}, fmt.Errorf("srvr %s: %w", addr, err)
	}
	var st ZKStatus
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Mode: "):
			st.Mode = strings.TrimSpace(strings.TrimPrefix(line, "Mode: "))
		case strings.HasPrefix(line, "Zxid: "):
			z, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(line, "Zxid: ")), "0x"), 16, 64)
			if err == nil {
				st.Zxid = z
			}
		case strings.Contains(line, "not currently serving"):
			return ZKStatus{}, fmt.Errorf("srvr %s: not serving requests", addr)
		}
	}
	if err := sc.Err(); err != nil {
		return ZKStatus{}, fmt.Errorf("srvr %s: %w", addr, err)
	}
	if st.Mode == "" {
		return ZKStatus{}, fmt.Errorf("srvr %s: no Mode in reply", addr)
	}
	return st, nil
}

// zooCfg renders one server's configuration. Every server gets the same file
// but its myid.
func zooCfg(o ZKOptions, ips []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\n", o.TickTime.Milliseconds())
	fmt.Fprintf(&b, "initLimit=%d\nsyncLimit=%d\n", o.InitLimit, o.SyncLimit)
	fmt.Fprintf(&b, "minSessionTimeout=%d\nmaxSessionTimeout=%d\n", o.MinSessionTimeout.Milliseconds(), o.MaxSessionTimeout.Milliseconds())
	b.WriteString("dataDir=/zk/data\nclientPort=2181\n")
	b.WriteString("4lw.commands.whitelist=*\nadmin.enableServer=false\n")
	// Snapshots are taken every snapCount transactions; autopurge keeps the
	// run directory bounded on long runs.
	b.WriteString("autopurge.snapRetainCount=3\nautopurge.purgeInterval=1\n")
	if len(ips) > 1 {
		b.WriteString("standaloneEnabled=false\n")
		// Quorum ports listen on every address so a restarted peer is
		// accepted however it connects.
		b.WriteString("quorumListenOnAllIPs=true\n")
		for i, ip := range ips {
			fmt.Fprintf(&b, "server.%d=%s:2888:3888\n", i+1, ip)
		}
	}
	return b.String()
}
