package scenarios

import (
	"net/netip"
	"testing"

	"github.com/zkchaos/zkchaos/fourletter"
)

func TestHasSession(t *testing.T) {
	ip := netip.MustParseAddr("10.0.0.101")
	tests := []struct {
		name string
		cons string
		want bool
	}{
		{"established", " /10.0.0.101:43122[1](queued=0,recved=4,sent=4,sid=0x1000a1b2c0001,lop=PING,est=1,to=6000)\n", true},
		{"among others", " /10.0.0.1:5000[1](queued=0,recved=1,sent=1,sid=0x100,lop=PING)\n /10.0.0.101:43122[1](queued=0,recved=4,sent=4,sid=0x101,lop=PING)\n\n", true},
		{"handshake not done", " /10.0.0.101:43122[0](queued=0,recved=1,sent=0)\n", false},
		{"another broker", " /10.0.0.102:43122[1](queued=0,recved=4,sent=4,sid=0x101,lop=PING)\n", false},
		{"address prefix", " /10.0.0.10:43122[1](queued=0,recved=4,sent=4,sid=0x101,lop=PING)\n", false},
		{"not serving", "This ZooKeeper instance is not currently serving requests\n", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hasSession(fourletter.ParseCons(tt.cons), ip); got != tt.want {
				t.Errorf("hasSession = %v, want %v", got, tt.want)
			}
		})
	}
}
