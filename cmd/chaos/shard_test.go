package main

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/faults"
)

// runCLI runs the chaos command line in-process and returns its output and
// exit status.
func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	if err != nil {
		out.WriteString(err.Error())
	}
	return out.String(), exitCode(err)
}

func TestParseShard(t *testing.T) {
	tests := []struct {
		in      string
		want    shard
		wantErr string
	}{
		{in: "", want: shard{1, 1}},
		{in: "1/1", want: shard{1, 1}},
		{in: "2/4", want: shard{2, 4}},
		{in: " 3 / 3 ", want: shard{3, 3}},
		{in: "0/2", wantErr: "between 1 and 2"},
		{in: "3/2", wantErr: "between 1 and 2"},
		{in: "1/0", wantErr: "at least 1"},
		{in: "-1/2", wantErr: "between 1 and 2"},
		{in: "2", wantErr: "want I/N"},
		{in: "a/2", wantErr: "not a number"},
		{in: "1/b", wantErr: "not a number"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseShard(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--shard") {
					t.Fatalf("parseShard(%q) = %v, %v; want an error naming --shard with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseShard(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

// The shards of a seed list must partition it: every seed in exactly one
// shard, sizes within one of each other, and the same answer every time.
func TestShardsPartitionTheSeedList(t *testing.T) {
	for _, tt := range []struct {
		first      uint64
		seeds, cnt int
	}{{100, 4, 2}, {7, 20, 3}, {0, 5, 5}, {1 << 40, 9, 1}, {3, 10, 4}} {
		var all []uint64
		minN, maxN := tt.seeds, 0
		for i := 1; i <= tt.cnt; i++ {
			s := shard{i, tt.cnt}
			got := slices.Collect(s.seeds(tt.first, tt.seeds))
			if !slices.Equal(got, slices.Collect(s.seeds(tt.first, tt.seeds))) {
				t.Fatalf("shard %s of %+v is not deterministic", s, tt)
			}
			minN, maxN = min(minN, len(got)), max(maxN, len(got))
			all = append(all, got...)
		}
		slices.Sort(all)
		var want []uint64
		for j := 0; j < tt.seeds; j++ {
			want = append(want, tt.first+uint64(j))
		}
		if !slices.Equal(all, want) {
			t.Errorf("%+v: shards together hold %v, want each of %v once", tt, all, want)
		}
		if maxN-minN > 1 {
			t.Errorf("%+v: shard sizes range from %d to %d", tt, minN, maxN)
		}
	}
}

// A seed list is not made before it is run: --seeds as large as an int
// gives its first seed at once, and Ctrl-C stops a dry run between seeds
// (main's context is cancelled, not the process).
func TestSeedListIsLazy(t *testing.T) {
	for _, sh := range []shard{{1, 1}, {2, 3}} {
		for seed := range sh.seeds(10, math.MaxInt) {
			if want := uint64(10 + sh.Index - 1); seed != want {
				t.Fatalf("shard %s: first seed %d, want %d", sh, seed, want)
			}
			break
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"run", "--dry-run", "--seed", "1", "--seeds", "1000000"})
	if err := root.ExecuteContext(ctx); exitCode(err) != exitBad || strings.Contains(out.String(), "seed 1:") {
		t.Fatalf("cancelled dry run: exit %d (%v), want %d before any schedule\n%.300s", exitCode(err), err, exitBad, out.String())
	}
}

func TestRunDryRun(t *testing.T) {
	a, code := runCLI(t, "run", "--dry-run", "--seed", "42", "--time-limit", "40s")
	if code != exitValid {
		t.Fatalf("exit %d: %s", code, a)
	}
	b, _ := runCLI(t, "run", "--dry-run", "--seed", "42", "--time-limit", "40s")
	if a != b {
		t.Fatalf("same seed printed different schedules:\n%s\n---\n%s", a, b)
	}
	c, _ := runCLI(t, "run", "--dry-run", "--seed", "43", "--time-limit", "40s")
	if a == c {
		t.Fatalf("seeds 42 and 43 printed the same schedule:\n%s", a)
	}
	// What is printed is what the harness would plan for that seed.
	want := faults.Plan(42, faults.Topology{Nodes: 3, ZKServers: 3}, 40*time.Second, 2*time.Second, 6*time.Second, faults.Catalogue)
	if len(want.Steps) == 0 {
		t.Fatal("test needs a schedule with faults")
	}
	for _, st := range want.Steps {
		if !strings.Contains(a, string(st.Kind)) || !strings.Contains(a, st.At.Round(time.Millisecond).String()) {
			t.Errorf("dry run lacks step %+v:\n%s", st, a)
		}
	}

	// Openings are marked with the seed bug they aim at; other steps are
	// not.
	for _, st := range want.Steps {
		line := ""
		for _, l := range strings.Split(a, "\n") {
			if strings.Contains(l, " "+st.At.Round(time.Millisecond).String()+" ") {
				line = l
			}
		}
		if marked := strings.Contains(line, "[opening "); marked != st.Opening {
			t.Errorf("step at %s (opening %v) printed as %q", st.At, st.Opening, line)
		}
	}
	if !strings.Contains(a, "[opening KAFKA-532]") || !strings.Contains(a, "[opening KAFKA-7235]") {
		t.Errorf("dry run lacks the failpoint openings:\n%s", a)
	}

	// A shard prints only its seeds.
	s, code := runCLI(t, "run", "--dry-run", "--seed", "10", "--seeds", "4", "--shard", "2/2")
	if code != exitValid || !strings.Contains(s, "seed 11 (shard 2/2)") || !strings.Contains(s, "seed 13 (shard 2/2)") ||
		strings.Contains(s, "seed 10") || strings.Contains(s, "seed 12") {
		t.Fatalf("shard 2/2 of seeds 10..13: exit %d\n%s", code, s)
	}

	// A replay prints the stored schedule, not a new plan.
	p := t.TempDir() + "/schedule.json"
	stored := faults.Schedule{Seed: 5, Total: 20 * time.Second, Steps: []faults.Step{{At: 1500 * time.Millisecond, Kind: faults.IsolateZKLeader, Hold: 3 * time.Second, Pick: 9}}}
	if err := stored.Save(p); err != nil {
		t.Fatal(err)
	}
	r, code := runCLI(t, "run", "--dry-run", "--replay", p)
	if code != exitValid || !strings.Contains(r, "seed 5: 1 faults in 20s") || !strings.Contains(r, "isolate-zk-leader") {
		t.Fatalf("replay dry run: exit %d\n%s", code, r)
	}
}

func TestRunShardBadInput(t *testing.T) {
	sched := t.TempDir() + "/schedule.json"
	if err := (faults.Schedule{Seed: 1, Total: time.Second}).Save(sched); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"not I/N", []string{"--seed", "1", "--shard", "x"}, "--shard"},
		{"index past count", []string{"--seed", "1", "--seeds", "4", "--shard", "5/4"}, "--shard"},
		{"zero count", []string{"--seed", "1", "--shard", "0/0"}, "--shard"},
		{"empty shard", []string{"--seed", "1", "--seeds", "2", "--shard", "3/3"}, "no seed"},
		{"no explicit seed", []string{"--seeds", "4", "--shard", "1/2"}, "explicit --seed"},
		{"with replay", []string{"--replay", sched, "--shard", "1/2"}, "cannot be sharded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"run", "--dry-run"}, tt.args...)
			out, code := runCLI(t, args...)
			if code != exitBad || !strings.Contains(out, tt.want) {
				t.Fatalf("chaos %s: exit %d, output %q; want exit 2 naming %q", strings.Join(args, " "), code, out, tt.want)
			}
		})
	}
}
