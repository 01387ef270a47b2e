package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/scenarios"
)

// shellWords splits a command line the way a POSIX shell does, by asking one.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", `printf '%s\0' `+line).Output()
	if err != nil {
		t.Fatalf("sh cannot split %q: %v", line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// A replay command, pasted into a shell and parsed by the real `chaos run`
// command, asks for the run it was built from. A flag renamed on one side
// only, or a value the CLI would read differently, fails here.
func TestReplayCommandParsesBackThroughChaosRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs dir", "r-1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sched := faults.Plan(77, faults.Topology{Nodes: 3, ZKServers: 3}, 40*time.Second, time.Second, 3*time.Second, faults.Catalogue)
	if err := sched.Save(filepath.Join(dir, rundir.ScheduleFile)); err != nil {
		t.Fatal(err)
	}
	base := rundir.Info{
		Seed: 77, ZK: rundir.ZK{Servers: 5}, Nodes: 4, Bugs: []string{"KAFKA-532", "KAFKA-7235"},
		NodeFlags: []string{"--offline-election=unclean", "--failpoint=it's here"}, ZKSessionTimeout: 4 * time.Second,
		Partitions: 2, Producers: 3, Readers: 1, TimeLimit: 40 * time.Second,
		Faults: []string{"pause-controller", "isolate-zk-leader"}, MinHold: time.Second, MaxHold: 3 * time.Second,
	}
	nonIdempotent := base
	nonIdempotent.NonIdempotent = true
	noWorkload := base
	noWorkload.NoWorkload, noWorkload.Faults = true, nil
	admin := base
	admin.Admin = true
	dense := admin
	dense.Density = 1.5
	spread := admin
	spread.SpreadTopic = "chaos-rf2"
	tests := []struct {
		name     string
		info     rundir.Info
		schedule bool
	}{
		{"re-plan from the seed", base, false},
		{"replay the stored schedule", base, true},
		{"control plane only, fault-free", noWorkload, false},
		{"non-idempotent producers", nonIdempotent, false},
		{"with the admin workload", admin, false},
		{"dense, re-planned from the seed", dense, false},
		{"with the spread topic", spread, false},
		{"with the spread topic, the stored schedule", spread, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := rundir.ReplayCommand(dir, &tt.info, tt.schedule)
			words := shellWords(t, line)
			if len(words) < 2 || words[0] != "chaos" || words[1] != "run" {
				t.Fatalf("not a chaos run command: %q", line)
			}
			o := &runOptions{}
			cmd := newRunCmdWith(o)
			if err := cmd.ParseFlags(words[2:]); err != nil {
				t.Fatalf("chaos run refuses %q: %v", line, err)
			}
			cfg, seeds, err := o.config()
			if err != nil {
				t.Fatalf("chaos run refuses %q: %v", line, err)
			}
			if seeds != 1 {
				t.Errorf("replay runs %d seeds", seeds)
			}
			if tt.schedule != (cfg.Schedule != nil) {
				t.Fatalf("schedule loaded = %v, want %v", cfg.Schedule != nil, tt.schedule)
			}
			if tt.schedule && !reflect.DeepEqual(*cfg.Schedule, sched) {
				t.Errorf("replayed schedule differs from the stored one")
			}
			// The command line carries what the run chose; what no flag
			// sets (topic, RF, acks, settle, tick) is the default on both
			// sides.
			got := cfg.RunSpec
			got.Defaults()
			want := tt.info
			want.Defaults()
			if tt.schedule { // the schedule, not the flags, carries these
				want.TimeLimit, want.Faults, want.MinHold, want.MaxHold = sched.Total, nil, 0, 0
				got.Faults, got.MinHold, got.MaxHold = nil, 0, 0
			}
			if want.NoWorkload { // clients are not started, so not replayed
				got.Producers, got.Readers, want.Producers, want.Readers = 0, 0, 0, 0
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s\nparses to %+v\nwant      %+v", line, got, want)
			}
		})
	}
}

// The replay command of a scenario's run, parsed by the real `chaos repro`
// command, runs that scenario in that mode and no other: for every mode of
// every scenario (a scenario of three modes names its runs "BUG MODE").
func TestReplayCommandOfAScenarioRunParsesBackThroughChaosRepro(t *testing.T) {
	for _, sc := range scenarios.All() {
		for _, m := range sc.Modes {
			t.Run(sc.Bug+" "+m.Name, func(t *testing.T) {
				spec := sc.Config(m).RunSpec
				line := rundir.ReplayCommand(t.TempDir(), &spec, true)
				words := shellWords(t, line)
				if len(words) < 2 || words[0] != "chaos" || words[1] != "repro" {
					t.Fatalf("not a chaos repro command: %q", line)
				}
				cmd := newReproCmd()
				if err := cmd.ParseFlags(words[2:]); err != nil {
					t.Fatalf("chaos repro refuses %q: %v", line, err)
				}
				args := cmd.Flags().Args()
				if len(args) != 1 {
					t.Fatalf("%q: arguments %q, want the scenario", line, args)
				}
				got, err := scenarios.Get(args[0])
				if err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				mode, _ := cmd.Flags().GetString("mode")
				fixed, _ := cmd.Flags().GetBool("fixed")
				modes, err := reproModes(got, mode, fixed)
				if err != nil || got.Bug != sc.Bug || len(modes) != 1 || modes[0].Name != m.Name {
					t.Fatalf("%q runs %s modes %v (%v), want %s %s alone", line, got.Bug, modes, err, sc.Bug, m.Name)
				}
			})
		}
	}
}
