package fourletter

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeServer answers every connection's word with reply.
func fakeServer(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4)
			c.Read(buf)
			c.Write([]byte(reply))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

func TestSrvr(t *testing.T) {
	tests := []struct {
		name     string
		reply    string
		wantMode string
		wantZxid int64
		wantErr  string
	}{
		{"leader", "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nZxid: 0x100000005\nMode: leader\nNode count: 5\n", "leader", 0x100000005, ""},
		{"follower", "Zxid: 0x0\nMode: follower\n", "follower", 0, ""},
		{"not serving", "This ZooKeeper instance is not currently serving requests\n", "", 0, "not serving"},
		{"garbage", "hello\n", "", 0, "no Mode"},
		{"bad zxid", "Zxid: 0xzz\nMode: follower\n", "", 0, "bad zxid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := Srvr(context.Background(), fakeServer(t, tt.reply), time.Second)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || st.Mode != tt.wantMode || st.Zxid != tt.wantZxid {
				t.Fatalf("got %+v, %v; want mode %s zxid %#x", st, err, tt.wantMode, tt.wantZxid)
			}
		})
	}
	if _, err := Srvr(context.Background(), "127.0.0.1:1", 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "srvr 127.0.0.1:1") {
		t.Fatalf("no server: err %v, want one naming the word and address", err)
	}
}

func TestCons(t *testing.T) {
	a := func(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
	tests := []struct {
		name string
		out  string
		want []Conn
	}{
		{"established", " /10.0.0.101:43122[1](queued=0,recved=4,sent=4,sid=0x1000a1b2c0001,lop=PING,est=1,to=6000)\n",
			[]Conn{{Addr: a("10.0.0.101:43122"), Session: true, Established: 1}}},
		{"several, one in its handshake, one IPv4-mapped", ` /10.213.0.12:40412[1](queued=0,recved=52,sent=52,sid=0x10000a1b2c30001,lop=PING,est=1764790000000,to=3000)
 /10.213.0.1:51234[1](queued=0,recved=9,sent=9,sid=0x10000a1b2c30002)
 /[::ffff:10.213.0.13]:40999[0](queued=0,recved=1,sent=0)

`, []Conn{{Addr: a("10.213.0.12:40412"), Session: true, Established: 1764790000000}, {Addr: a("10.213.0.1:51234"), Session: true}, {Addr: a("10.213.0.13:40999")}}},
		{"not serving", "This ZooKeeper instance is not currently serving requests\n", nil},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseCons(tt.out); !slices.Equal(got, tt.want) {
				t.Errorf("ParseCons = %+v, want %+v", got, tt.want)
			}
		})
	}
	conns, err := Cons(context.Background(), fakeServer(t, tests[0].out), time.Second)
	if err != nil || len(conns) != 1 || !conns[0].Session {
		t.Fatalf("Cons: %+v, %v", conns, err)
	}
}
