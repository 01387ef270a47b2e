package cluster

import (
	"fmt"
	"strings"
)

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
