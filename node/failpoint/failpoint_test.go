package failpoint

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseAction(t *testing.T) {
	tests := []struct {
		in   string
		want Action
		err  bool
	}{
		{"sleep(250ms)", Action{Kind: ActSleep, Sleep: 250 * time.Millisecond}, false},
		{"sleep(1500)", Action{Kind: ActSleep, Sleep: 1500 * time.Millisecond}, false},
		{"2*sleep(1s)", Action{Kind: ActSleep, Sleep: time.Second, Count: 2}, false},
		{"error", Action{Kind: ActError}, false},
		{`return("x")`, Action{Kind: ActError}, false},
		{"sigstop", Action{Kind: ActSigstop}, false},
		{"1*pause", Action{Kind: ActPause, Count: 1}, false},
		{"off", Action{Kind: ActOff}, false},
		{"sleep(x)", Action{}, true},
		{"sleep(-1s)", Action{}, true},
		{"0*pause", Action{}, true},
		{"panic", Action{}, true},
	}
	for _, tt := range tests {
		got, err := ParseAction(tt.in)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("ParseAction(%q) = %+v, %v", tt.in, got, err)
		}
	}
}

func TestEvalActions(t *testing.T) {
	r := New()
	var mu sync.Mutex
	var hits []string
	r.OnHit = func(h Hit) {
		mu.Lock()
		hits = append(hits, h.Name+":"+h.Phase)
		mu.Unlock()
	}
	ctx := context.Background()
	if err := r.Eval(ctx, BrokerBeforeRegister); err != nil {
		t.Fatalf("unarmed: %v", err)
	}
	if err := r.Arm("nope", Action{Kind: ActError}); err == nil {
		t.Fatal("unknown failpoint armed")
	}
	if err := r.ArmSpec("controller-after-zk-write=1*error;broker-before-register=sleep(30ms)"); err != nil {
		t.Fatal(err)
	}
	if err := r.Eval(ctx, ControllerAfterZKWrite); !errors.Is(err, ErrInjected) {
		t.Fatalf("error action: %v", err)
	}
	if err := r.Eval(ctx, ControllerAfterZKWrite); err != nil {
		t.Fatalf("1* fired twice: %v", err)
	}
	start := time.Now()
	r.Eval(ctx, BrokerBeforeRegister)
	if time.Since(start) < 30*time.Millisecond {
		t.Fatal("sleep action did not sleep")
	}

	// pause holds until released.
	r.Arm(BrokerControlledShutdown, Action{Kind: ActPause})
	done := make(chan struct{})
	go func() { r.Eval(ctx, BrokerControlledShutdown); close(done) }()
	select {
	case <-done:
		t.Fatal("pause did not hold")
	case <-time.After(50 * time.Millisecond):
	}
	if err := r.Release(BrokerControlledShutdown); err != nil {
		t.Fatal(err)
	}
	<-done
	// Disarm also releases a holder.
	done = make(chan struct{})
	go func() { r.Eval(ctx, BrokerControlledShutdown); close(done) }()
	time.Sleep(20 * time.Millisecond)
	r.Disarm(BrokerControlledShutdown)
	<-done

	mu.Lock()
	defer mu.Unlock()
	want := []string{"controller-after-zk-write:start", "controller-after-zk-write:stop", "broker-before-register:start", "broker-before-register:stop"}
	for i, w := range want {
		if hits[i] != w {
			t.Fatalf("hits %v, want prefix %v", hits, want)
		}
	}
}

// As PID 1 the sigstop action cannot stop the process; it holds until
// SIGCONT or release.
func TestSigstopAsPID1Holds(t *testing.T) {
	r := New()
	r.getpid = func() int { return 1 }
	var detail string
	r.OnHit = func(h Hit) {
		if h.Phase == "start" {
			detail = h.Detail
		}
	}
	r.Arm(ControllerBeforeBrokerChange, Action{Kind: ActSigstop})
	done := make(chan struct{})
	go func() { r.Eval(context.Background(), ControllerBeforeBrokerChange); close(done) }()
	time.Sleep(30 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("did not hold")
	default:
	}
	r.Release(ControllerBeforeBrokerChange)
	<-done
	if detail == "" {
		t.Fatal("no start report")
	}
}

func TestArmOnceFile(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/" + OnceFile
	r := New()
	if err := r.ArmOnceFile(p); err != nil || len(r.Armed()) != 0 {
		t.Fatalf("missing file: %v, armed %v", err, r.Armed())
	}
	if err := os.WriteFile(p, []byte(BrokerBeforeRegister+"=1*pause\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.ArmOnceFile(p); err != nil || r.Armed()[BrokerBeforeRegister] != "1*pause" {
		t.Fatalf("armed %v, err %v", r.Armed(), err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file not consumed: %v", err)
	}
	os.WriteFile(p, []byte("nope=pause"), 0o644)
	if err := New().ArmOnceFile(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("bad file: %v", err)
	}
}
