package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/dockertest"
	"github.com/zkchaos/zkchaos/rundir"
)

// A user's own client (kcat, idempotent, acks=all) produces to a `chaos up`
// cluster while `chaos fault pause-controller` pauses the controller and
// `chaos fault heal` resumes it; every record is acknowledged and read back,
// the fault is in the run's history, and `chaos check` judges the run
// directory (valid or unknown, never a harness error).
func TestUpWithBrokersTakesFaults(t *testing.T) {
	dockertest.Require(t)
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if dockertest.InCI() {
			t.Fatal("CI=true: kcat is not installed (scripts/setup.sh installs it)")
		}
		t.Skip("kcat is not installed")
	}
	eng, err := docker.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	runID := "t-upb-" + cluster.NewRunID()[16:]
	t.Cleanup(func() { eng.RemoveLabelled(context.Background(), runID) })
	bin, err := docker.BuildGoBinary(t.Context(), "./cmd/chaos", "chaos-test")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	up := exec.Command(bin, "up", "--zk", "1", "--brokers", "3", "--partitions", "1", "--run-id", runID, "--dir", dir)
	up.Stderr = os.Stderr
	out, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	defer up.Process.Kill()
	boot := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			t.Logf("chaos up: %s", sc.Text())
			if b, ok := strings.CutPrefix(sc.Text(), "bootstrap "); ok {
				boot <- b
			}
		}
		close(boot)
	}()
	var bootstrap string
	select {
	case b, ok := <-boot:
		if !ok {
			up.Wait()
			t.Fatal("chaos up exited before it printed a bootstrap address")
		}
		bootstrap = b
	case <-time.After(15 * time.Minute): // includes a cold image build
		t.Fatal("chaos up printed no bootstrap address in time")
	}

	chaos := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		b, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		return string(b), err
	}
	// 600 records, 50 every 100 ms: the production spans the fault.
	const n = 600
	var vals []string
	for i := range n {
		vals = append(vals, fmt.Sprintf("up-%d", i))
	}
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < n; i += 50 {
			io.WriteString(pw, strings.Join(vals[i:i+50], "\n")+"\n")
			time.Sleep(100 * time.Millisecond)
		}
		pw.Close()
	}()
	pctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	prod := exec.CommandContext(pctx, kcat, "-b", bootstrap, "-P", "-t", "chaos", "-p", "0",
		"-X", "enable.idempotence=true", "-X", "linger.ms=5")
	prod.Stdin = pr
	var perr strings.Builder
	prod.Stderr = &perr
	if err := prod.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if msg, err := chaos("fault", "--dir", dir, "pause-controller"); err != nil {
		t.Fatalf("chaos fault pause-controller: %v: %s", err, msg)
	}
	time.Sleep(5 * time.Second) // beyond the 3 s session timeout: a new controller
	if msg, err := chaos("fault", "--dir", dir, "heal"); err != nil {
		t.Fatalf("chaos fault heal: %v: %s", err, msg)
	}
	if err := prod.Wait(); err != nil {
		t.Fatalf("kcat producer: %v: %s", err, perr.String())
	}
	rctx, rcancel := context.WithTimeout(t.Context(), time.Minute)
	defer rcancel()
	got, err := exec.CommandContext(rctx, kcat, "-b", bootstrap, "-C", "-t", "chaos", "-p", "0", "-o", "beginning", "-e", "-q").Output()
	if err != nil {
		t.Fatalf("kcat consumer: %v", err)
	}
	seen := map[string]int{}
	for _, v := range strings.Fields(string(got)) {
		seen[v]++
	}
	for _, v := range vals {
		if seen[v] != 1 {
			t.Errorf("acknowledged record %s read back %d times", v, seen[v])
		}
	}

	up.Process.Signal(syscall.SIGINT)
	if err := up.Wait(); err != nil {
		t.Fatalf("chaos up exited with %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, rundir.ControlFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left behind after chaos up stopped (%v)", rundir.ControlFile, err)
	}
	h, err := history.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var starts, stops, nodeEvents int
	for _, e := range h.Events {
		switch {
		case e.Kind == history.KindFaultStart && e.Fault != nil && strings.Contains(e.Fault.Name, "pause"):
			starts++
		case e.Kind == history.KindFaultStop:
			stops++
		case strings.HasPrefix(e.Source, "n"):
			nodeEvents++
		}
	}
	if starts == 0 || stops < starts || nodeEvents == 0 {
		t.Errorf("history has %d pause fault starts, %d stops, %d node events", starts, stops, nodeEvents)
	}
	msg, err := chaos("check", dir)
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != exitValid && code != exitUnknown {
		t.Fatalf("chaos check exited %d: %s", code, msg)
	}
	t.Logf("chaos check exited %d: %s", code, msg)
}
