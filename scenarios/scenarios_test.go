package scenarios

import (
	"os"
	"reflect"
	"testing"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/dockertest"
	"github.com/zkchaos/zkchaos/pipeline"
)

// Every scenario, run for real, both ways: with the bug its own checker must
// find it (another checker firing is not enough); with the fix the run must
// be valid.
func TestScenariosCatchTheirBugAndPassWhenFixed(t *testing.T) {
	dockertest.Require(t)
	for _, sc := range All() {
		for _, m := range []Mode{sc.BugMode(), sc.FixMode()} {
			t.Run(sc.Bug+"/"+m.Name, func(t *testing.T) {
				cfg := sc.Config(m)
				cfg.RunID = "t-" + cluster.NewRunID()[16:]
				cfg.RunDir = t.TempDir()
				if testing.Verbose() {
					cfg.Progress = os.Stderr
				}
				check := sc.Check
				o, err := pipeline.Execute(t.Context(), cfg, pipeline.Options{Check: &check, NoVisualize: true})
				if err != nil {
					t.Fatal(err)
				}
				rep := o.Results
				for _, r := range rep.Results {
					t.Logf("%s: %s: %s", r.Checker, r.Verdict, r.Explanation)
				}
				caught := sc.Catcher(rep.Results)
				if caught == nil {
					t.Fatalf("no result from %s", sc.Catches.Name())
				}
				if !m.Fixed && caught.Verdict != checkers.Invalid {
					t.Errorf("bug on, but %s says %s", caught.Checker, caught.Verdict)
				}
				if m.Fixed && rep.Verdict != checkers.Valid {
					t.Errorf("fix on, but the verdict is %s", rep.Verdict)
				}
			})
		}
	}
}

// Each scenario's checker is one the check step runs: a scenario naming a
// checker that does not exist, or one configured differently from the runs'
// checker set, fails here rather than passing its bug-mode run silently.
func TestScenariosNameRealCheckers(t *testing.T) {
	names := map[string]bool{}
	for _, sc := range All() {
		if err := sc.Validate(); err != nil {
			t.Error(err)
		}
		if names[sc.Bug] {
			t.Errorf("%s listed twice", sc.Bug)
		}
		names[sc.Bug] = true
		found := false
		for _, c := range checkers.All(sc.Check) {
			if reflect.DeepEqual(c, sc.Catches) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: %#v is not among checkers.All(its config)", sc.Bug, sc.Catches)
		}
	}
}

func TestValidateRejectsBadScenarios(t *testing.T) {
	good := kafka532()
	tests := []struct {
		name   string
		mutate func(*Scenario)
	}{
		{"no checker", func(s *Scenario) { s.Catches = nil }},
		{"a checker the check step does not run", func(s *Scenario) { s.Catches = notAChecker{} }},
		{"fixed mode first", func(s *Scenario) { s.Modes = []Mode{s.Modes[1], s.Modes[0]} }},
		{"one mode", func(s *Scenario) { s.Modes = s.Modes[:1] }},
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := kafka532()
			tt.mutate(&s)
			if s.Validate() == nil {
				t.Error("accepted")
			}
		})
	}
}

type notAChecker struct{}

func (notAChecker) Name() string { return "controller-fencng" }
func (notAChecker) Check(*history.History) checkers.Result {
	return checkers.Result{}
}

func TestGetNamesKnownScenarios(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{{"kafka-532", true}, {"KAFKA-3861", true}, {"KAFKA-7235", true}, {"kafka-16667", true}, {"KAFKA-1", false}, {"", false}} {
		if _, err := Get(tt.name); (err == nil) != tt.ok {
			t.Errorf("Get(%q): %v", tt.name, err)
		}
	}
	sc, _ := Get("KAFKA-3861")
	if _, err := sc.Mode("UNCLEAN"); err != nil {
		t.Error(err)
	}
	if _, err := sc.Mode("bug"); err == nil {
		t.Error("KAFKA-3861 has no mode called bug")
	}
}

// A one-switch scenario turns its bug's switch on in the bug mode only, and
// each run gets its own node flags.
func TestOneSwitchModes(t *testing.T) {
	for _, sc := range []Scenario{kafka532(), kafka7235(), kafka16667()} {
		t.Run(sc.Bug, func(t *testing.T) {
			bug, fixed := sc.Config(sc.BugMode()), sc.Config(sc.FixMode())
			if !reflect.DeepEqual(bug.Bugs, []string{sc.Bug}) || len(fixed.Bugs) != 0 {
				t.Errorf("bug switches: bug mode %v, fixed mode %v; want [%s] and none", bug.Bugs, fixed.Bugs, sc.Bug)
			}
			if bug.Scenario != sc.Bug || fixed.Scenario != sc.Bug {
				t.Errorf("scenario names %q, %q; want %q", bug.Scenario, fixed.Scenario, sc.Bug)
			}
			bug.Bugs, bug.Scenario = nil, ""
			fixed.Scenario = ""
			if !reflect.DeepEqual(bug, fixed) {
				t.Errorf("the modes differ in more than the switch:\n%+v\n%+v", bug, fixed)
			}
			if len(bug.NodeFlags) > 0 {
				bug.NodeFlags[0] = "changed"
				if sc.Config(sc.FixMode()).NodeFlags[0] == "changed" {
					t.Error("runs share their node flags")
				}
			}
		})
	}
}
