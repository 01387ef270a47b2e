package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/internal/wanttext"
)

func TestZooCfg(t *testing.T) {
	o := ZKOptions{Servers: 3}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	cfg := zooCfg(o, []string{"10.0.0.11", "10.0.0.12", "10.0.0.13"})
	wanttext.Contains(t, "zoo.cfg", cfg,
		"tickTime=200\n", "minSessionTimeout=400\n", "maxSessionTimeout=30000\n",
		"server.1=10.0.0.11:2888:3888\n", "server.3=10.0.0.13:2888:3888\n",
		"standaloneEnabled=false\n", "4lw.commands.whitelist=*\n")
	single := zooCfg(o, []string{"10.0.0.11"})
	if strings.Contains(single, "server.1=") {
		t.Errorf("a single server must run standalone:\n%s", single)
	}
}

func TestZKOptionsDefaultsAndErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      ZKOptions
		wantErr string
	}{
		{"zero is three servers", ZKOptions{}, ""},
		{"even ensemble", ZKOptions{Servers: 4}, "want 1, 3 or 5"},
		{"tick too small", ZKOptions{TickTime: time.Millisecond}, "below 10ms"},
		{"max below min", ZKOptions{MinSessionTimeout: 5 * time.Second, MaxSessionTimeout: time.Second}, "below min"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.in.defaults()
			if tt.wantErr == "" {
				if err != nil || tt.in.Servers != 3 {
					t.Fatalf("err %v, servers %d", err, tt.in.Servers)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
		})
	}
}
