package rundir

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/zkchaos/zkchaos/nemesis"
)

// storedRuns are run directories with a stored run.json. Those under
// testdata/run-json were written by the build at commit f7d264f, the last
// before RunSpec, from `chaos run` flags and from a scenario, with
// replay.txt: that build's replay commands, re-planned and from the
// schedule (a three-mode scenario's corrected since: see
// TestReplayCommandOfScenarioRuns). old-format-random is the regression
// corpus' run.json with its scenario taken out, so the older format (a dump
// of the harness's whole configuration, with keys RunSpec does not have)
// is replayed as a random run too; the regression corpus' run itself is
// read as stored.
func storedRuns(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "run-json", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no stored run.json under testdata/run-json (%v)", err)
	}
	old, err := filepath.Glob(filepath.Join("..", "testdata", "regressions", "*"))
	if err != nil || len(old) == 0 {
		t.Fatalf("no stored run under testdata/regressions (%v)", err)
	}
	return append(dirs, old...)
}

// parseReplay reads replay arguments the way `chaos run` does: into
// Default() through Register, the stored schedule (if named) applied last.
func parseReplay(t *testing.T, args []string, sched *nemesis.Schedule) RunSpec {
	t.Helper()
	s := Default()
	fs := pflag.NewFlagSet("chaos run", pflag.ContinueOnError)
	s.Register(fs)
	replay := fs.String(FlagReplay, "", "")
	if err := fs.Parse(args); err != nil {
		t.Fatalf("chaos run refuses %q: %v", args, err)
	}
	if *replay != "" {
		s.ApplySchedule(*sched)
	}
	return s
}

// Every stored run.json reads into a RunSpec that writes back as the same
// run (and, for the files of the last build, byte for byte: the format did
// not change), replays with exactly the command its build printed, and
// whose replay arguments parse back through the flags into the same spec:
// spec → run.json → spec → replay args → spec is the identity on what a
// run is asked to do (its id, directory and build are where and by what it
// ran, not what). A scenario's run replays through `chaos repro` instead.
func TestStoredRunJSONRoundTrips(t *testing.T) {
	for _, dir := range storedRuns(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			stored, err := os.ReadFile(filepath.Join(dir, RunFile))
			if err != nil {
				t.Fatal(err)
			}
			spec, err := ReadInfo(dir)
			if err != nil || spec == nil {
				t.Fatalf("read %s: %v", dir, err)
			}
			tmp := t.TempDir()
			if err := WriteInfo(tmp, *spec); err != nil {
				t.Fatal(err)
			}
			again, err := ReadInfo(tmp)
			if err != nil || !reflect.DeepEqual(again, spec) {
				t.Fatalf("run.json round trip: %+v (%v)\nwant %+v", again, err, spec)
			}
			written, _ := os.ReadFile(filepath.Join(tmp, RunFile))
			// The regression corpus' run has the keys of an older
			// format, which RunSpec leaves out.
			if old := bytes.Contains(stored, []byte(`"Schedule"`)); !old && !bytes.Equal(written, stored) {
				t.Errorf("run.json written differs from the stored one:\n%s\nwant\n%s", written, stored)
			}

			sched := nemesis.Schedule{Seed: spec.Seed, Total: spec.TimeLimit, Density: spec.Density}
			for _, fromSchedule := range []bool{false, true} {
				line := ReplayCommand("RUN", spec, fromSchedule)
				if golden, err := os.ReadFile(filepath.Join(dir, "replay.txt")); err == nil {
					want := strings.Split(string(golden), "\n")[map[bool]int{false: 0, true: 1}[fromSchedule]]
					if line != want {
						t.Errorf("replay command (schedule %v)\n%s\nwant the stored build's\n%s", fromSchedule, line, want)
					}
				}
				if spec.Scenario != "" {
					if !strings.HasPrefix(line, "chaos repro ") {
						t.Errorf("a scenario's run replays as %q", line)
					}
					continue
				}
				args, err := spec.ReplayArgs("RUN", fromSchedule)
				if err != nil {
					t.Fatal(err)
				}
				got := parseReplay(t, args, &sched)
				want := *spec
				got.Defaults()
				want.Defaults()
				want.RunID, want.RunDir, want.Build = "", "", ""
				if fromSchedule {
					// The schedule, not the flags, carries the faults:
					// the kinds and holds are the flags' defaults.
					want.Faults, want.MinHold, want.MaxHold = got.Faults, got.MinHold, got.MaxHold
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s\nparses to %+v\nwant      %+v", strings.Join(args, " "), got, want)
				}
			}
		})
	}
}

// A run of a scenario of more than two modes is named "BUG MODE", and
// replays as that mode: `chaos repro BUG --mode MODE`. A two-mode
// scenario's run replays with --fixed when no bug switch was on.
func TestReplayCommandOfScenarioRuns(t *testing.T) {
	for _, tt := range []struct {
		spec RunSpec
		want string
	}{
		{RunSpec{Scenario: "KAFKA-532", Bugs: []string{"KAFKA-532"}}, "chaos repro KAFKA-532"},
		{RunSpec{Scenario: "KAFKA-532"}, "chaos repro KAFKA-532 --fixed"},
		{RunSpec{Scenario: "KAFKA-3861 offline"}, "chaos repro KAFKA-3861 --mode offline"},
		{RunSpec{Scenario: "KAFKA-3861 query-leo"}, "chaos repro KAFKA-3861 --mode query-leo"},
	} {
		if got := ReplayCommand("RUN", &tt.spec, true); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.spec.Scenario, got, tt.want)
		}
	}
}

// The flags' defaults are the spec's: a `chaos run` with no flags asks for
// Default(), and Default() is the zero spec with its defaults filled in,
// every fault kind, the admin workload and the spread topic; its RF is
// left to the brokers the flags ask for.
func TestFlagDefaultsAreSpecDefaults(t *testing.T) {
	if got := parseReplay(t, nil, nil); !reflect.DeepEqual(got, Default()) {
		t.Errorf("no flags: %+v\nwant %+v", got, Default())
	}
	var zero RunSpec
	zero.Defaults()
	want := Default()
	want.Defaults()
	want.Faults, want.Admin, want.SpreadTopic = nil, false, ""
	if !reflect.DeepEqual(zero, want) {
		t.Errorf("zero spec with defaults %+v\nwant %+v", zero, want)
	}
	// Register shows each default as the flag's, so the help says what a
	// run without the flag gets.
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	d := Default()
	d.Register(fs)
	for name, want := range map[string]string{
		FlagTimeLimit: "30s", FlagFaults: "all", FlagMinHold: "2s", FlagMaxHold: "6s", FlagNodes: "3",
		FlagZK: "3", FlagPartitions: "3", FlagProducers: "4", FlagReaders: "2", FlagSessionTimeout: "3s",
		FlagAdmin: "true", FlagSpreadTopic: "true", FlagFaultDensity: "0", FlagNoWorkload: "false",
	} {
		if got := fs.Lookup(name).DefValue; got != want {
			t.Errorf("--%s default %q, want %q", name, got, want)
		}
	}
}

// flagTestValues give every flag Register defines a value other than its
// default.
var flagTestValues = map[string]string{
	FlagSeed: "99", FlagTimeLimit: "41s", FlagFaults: "pause-node", FlagMinHold: "1s", FlagMaxHold: "9s",
	FlagBugs: "KAFKA-532", FlagNodeFlag: "--x=y", FlagNodes: "5", FlagZK: "5", FlagPartitions: "7",
	FlagNoWorkload: "true", FlagProducers: "1", FlagReaders: "9", FlagSessionTimeout: "8s",
	FlagNonIdempotent: "true", FlagAdmin: "false", FlagFaultDensity: "2", FlagSpreadTopic: "false",
	FlagCover: "true", FlagOpenings: "false", FlagWorkload: "queue", FlagQueueTxn: "true",
}

// notFlags are the RunSpec fields no `chaos run` flag sets: where and by
// what a run ran, and what only scenarios and `chaos up` choose.
var notFlags = []string{"RunID", "RunDir", "Build", "Scenario", "Topic", "RF", "Acks", "Settle",
	"ZK.TickTime", "ZK.InitLimit", "ZK.SyncLimit", "ZK.MinSessionTimeout", "ZK.MaxSessionTimeout", "ZK.HeapMB"}

// Every setting of a run has a flag (so a replay command can repeat it),
// or is named in notFlags: a field added to RunSpec without one fails
// here. Each flag is set to a value other than its default, and the fields
// that change are the ones it sets.
func TestEveryFieldHasAFlag(t *testing.T) {
	values := flagTestValues
	set := map[string]bool{}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	base := Default()
	base.Register(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		v, ok := values[f.Name]
		if !ok {
			t.Errorf("--%s: no test value", f.Name)
			return
		}
		s := Default()
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		s.Register(fs)
		if err := fs.Set(f.Name, v); err != nil {
			t.Fatalf("--%s %s: %v", f.Name, v, err)
		}
		changed := diffFields("", reflect.ValueOf(Default()), reflect.ValueOf(s))
		if len(changed) == 0 {
			t.Errorf("--%s %s changes no field", f.Name, v)
		}
		for _, c := range changed {
			set[c] = true
		}
	})
	for _, name := range fieldNames("", reflect.TypeOf(RunSpec{})) {
		if !set[name] && !slices.Contains(notFlags, name) {
			t.Errorf("RunSpec.%s: no flag sets it; give it one in Register (and ReplayArgs) or name it in notFlags", name)
		}
	}
}

func fieldNames(prefix string, typ reflect.Type) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
			out = append(out, fieldNames(prefix+f.Name+".", f.Type)...)
			continue
		}
		out = append(out, prefix+f.Name)
	}
	return out
}

func diffFields(prefix string, a, b reflect.Value) []string {
	var out []string
	for i := range a.NumField() {
		f := a.Type().Field(i)
		if f.Type.Kind() == reflect.Struct {
			out = append(out, diffFields(prefix+f.Name+".", a.Field(i), b.Field(i))...)
			continue
		}
		if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			out = append(out, prefix+f.Name)
		}
	}
	return out
}

// Validate names every setting no run can have by its flag, all at once.
func TestValidate(t *testing.T) {
	ok := Default()
	if err := ok.Validate(); err != nil {
		t.Fatalf("Default() refused: %v", err)
	}
	for _, tt := range []struct {
		name   string
		change func(*RunSpec)
		want   []string
	}{
		{"two ZooKeeper servers", func(s *RunSpec) { s.ZK.Servers = 2 }, []string{"--zk 2"}},
		{"no brokers, no partitions", func(s *RunSpec) { s.Nodes, s.Partitions = 0, 0 }, []string{"--nodes 0", "--partitions 0"}},
		{"no clients", func(s *RunSpec) { s.Producers, s.Readers = 0, 0 }, []string{"--producers 0", "--no-workload"}},
		{"no clients, control plane only", func(s *RunSpec) { s.Producers, s.Readers, s.NoWorkload = 0, 0, true }, nil},
		{"no time", func(s *RunSpec) { s.TimeLimit = 0 }, []string{"--time-limit 0s"}},
		{"a fault kind of another build", func(s *RunSpec) { s.Faults = []string{"pause-node", "melt-disk"} }, []string{"--faults pause-node,melt-disk", "melt-disk"}},
		{"holds upside down", func(s *RunSpec) { s.MinHold, s.MaxHold = 5*time.Second, time.Second }, []string{"--max-hold 1s"}},
		{"hold below the nemesis'", func(s *RunSpec) { s.MinHold = time.Nanosecond }, []string{"--min-hold 1ns"}},
		{"no session", func(s *RunSpec) { s.ZKSessionTimeout = 0 }, []string{"--session-timeout 0s"}},
		{"too dense", func(s *RunSpec) { s.Density = 9 }, []string{"--fault-density 9"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := Default()
			tt.change(&s)
			err := s.Validate()
			if (err != nil) != (len(tt.want) > 0) {
				t.Fatalf("err %v, want one naming %q", err, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v: does not name %q", err, w)
				}
			}
		})
	}
}

// ReplayArgs writes every flag Register defines, so a new setting with a
// flag but no line in ReplayArgs fails here: each flag is set to a value
// other than its default (flagTestValues), and the arguments
// parse back into the same spec.
func TestReplayArgsWriteEveryFlag(t *testing.T) {
	written := map[string]bool{}
	for _, noWorkload := range []bool{false, true} {
		s := Default()
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		s.Register(fs)
		for name, v := range flagTestValues {
			if err := fs.Set(name, v); err != nil {
				t.Fatalf("--%s %s: %v", name, v, err)
			}
		}
		s.NoWorkload = noWorkload
		args, err := s.ReplayArgs("RUN", false)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range args {
			if name, ok := strings.CutPrefix(a, "--"); ok {
				name, _, _ = strings.Cut(name, "=")
				written[name] = true
			}
		}
		got := parseReplay(t, args, nil)
		if noWorkload { // clients are not started, so not replayed
			got.Producers, got.Readers, got.NonIdempotent = s.Producers, s.Readers, s.NonIdempotent
		}
		if !reflect.DeepEqual(got, s) {
			t.Errorf("%s\nparses to %+v\nwant      %+v", strings.Join(args, " "), got, s)
		}
	}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	d := Default()
	d.Register(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		if !written[f.Name] {
			t.Errorf("--%s: ReplayArgs never writes it; a replay would take its default", f.Name)
		}
	})
}
