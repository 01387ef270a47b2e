package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
)

const nightlyWorkflow = "../../.github/workflows/nightly.yml"

// lintWorkflow runs actionlint (as a library, with shellcheck on the run:
// scripts when it is installed) over one workflow file's content.
func lintWorkflow(t *testing.T, content []byte) []*actionlint.Error {
	t.Helper()
	opts := &actionlint.LinterOptions{}
	if p, err := exec.LookPath("shellcheck"); err == nil {
		opts.Shellcheck = p
	}
	l, err := actionlint.NewLinter(io.Discard, opts)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.Lint(".github/workflows/nightly.yml", content, nil)
	if err != nil {
		t.Fatal(err)
	}
	return errs
}

// The nightly workflow must pass actionlint, and the test must be able to
// tell a broken one: each mutation below is a mistake actionlint catches.
func TestNightlyWorkflowLints(t *testing.T) {
	b, err := os.ReadFile(nightlyWorkflow)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range lintWorkflow(t, b) {
		t.Errorf("%s:%d:%d: %s [%s]", nightlyWorkflow, e.Line, e.Column, e.Message, e.Kind)
	}
	broken := []struct{ name, from, to string }{
		{"unknown job in needs", "needs: shard", "needs: shards"},
		{"unknown matrix key", "name: shard ${{ matrix.shard }}", "name: shard ${{ matrix.shrad }}"},
		{"bad cron", `"17 2 * * *"`, `"17 25 * * *"`},
	}
	for _, m := range broken {
		t.Run(m.name, func(t *testing.T) {
			if !strings.Contains(string(b), m.from) {
				t.Fatalf("workflow no longer contains %q", m.from)
			}
			if errs := lintWorkflow(t, []byte(strings.Replace(string(b), m.from, m.to, 1))); len(errs) == 0 {
				t.Fatalf("actionlint accepted the workflow with %q replaced by %q", m.from, m.to)
			}
		})
	}
}

// The workflow must run the same commands as scripts/nightly-local.sh: the
// shard script with the matrix position, and the merge script over every
// shard's artifact; both scripts must exist and pass bash -n.
func TestNightlyWorkflowUsesTheScripts(t *testing.T) {
	b, err := os.ReadFile(nightlyWorkflow)
	if err != nil {
		t.Fatal(err)
	}
	wf, errs := actionlint.Parse(b)
	if len(errs) > 0 {
		t.Fatalf("parse: %v", errs[0])
	}
	var shardRun, mergeRun string
	var uploads int
	for id, job := range wf.Jobs {
		for _, st := range job.Steps {
			switch ex := st.Exec.(type) {
			case *actionlint.ExecRun:
				if ex.Run == nil {
					continue
				}
				if strings.Contains(ex.Run.Value, "scripts/nightly-shard.sh") {
					shardRun = id
				}
				if strings.Contains(ex.Run.Value, "scripts/nightly-merge.sh") {
					mergeRun = id
				}
			case *actionlint.ExecAction:
				if strings.HasPrefix(ex.Uses.Value, "actions/upload-artifact@") {
					uploads++
				}
			}
		}
	}
	if shardRun == "" || mergeRun == "" || shardRun == mergeRun {
		t.Fatalf("want one job running nightly-shard.sh and another running nightly-merge.sh; got %q and %q", shardRun, mergeRun)
	}
	sj, mj := wf.Jobs[shardRun], wf.Jobs[mergeRun]
	if sj.Strategy == nil || sj.Strategy.Matrix == nil || sj.Strategy.Matrix.Rows["shard"] == nil {
		t.Errorf("job %s has no matrix of shards", shardRun)
	}
	needs := false
	for _, n := range mj.Needs {
		needs = needs || n.Value == shardRun
	}
	if !needs || mj.If == nil || !strings.Contains(mj.If.Value, "always()") {
		t.Errorf("job %s must need %s and run always (a red shard still gets merged)", mergeRun, shardRun)
	}
	if uploads < 2 {
		t.Errorf("want artifacts uploaded by the shards and by the merge, found %d uploads", uploads)
	}
	for _, s := range []string{"nightly-shard.sh", "nightly-merge.sh", "nightly-local.sh"} {
		if out, err := exec.Command("bash", "-n", filepath.Join("../../scripts", s)).CombinedOutput(); err != nil {
			t.Errorf("scripts/%s: %v\n%s", s, err, out)
		}
	}
}

// copyDir copies a stored run directory (small test fixtures only).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}

// The merge step: `chaos report --index DIR --junit FILE` with no RUN_DIR
// indexes every run already in DIR (as the shards left them: checked, not
// re-rendered) and writes one JUnit file over all of them.
func TestReportIndexOnlyMergesShards(t *testing.T) {
	runs := t.TempDir()
	for _, id := range []string{"shard1-run", "shard2-run", "shard2-unchecked"} {
		copyDir(t, "testdata/kafka-532", filepath.Join(runs, id))
	}
	for _, id := range []string{"shard1-run", "shard2-run"} {
		if out, code := runCLI(t, "check", "--visualize=false", filepath.Join(runs, id)); code != exitInvalid {
			t.Fatalf("check %s: exit %d\n%s", id, code, out)
		}
	}
	junit := filepath.Join(t.TempDir(), "junit.xml")
	out, code := runCLI(t, "report", "--index", runs, "--junit", junit)
	if code != exitValid {
		t.Fatalf("exit %d\n%s", code, out)
	}
	idx, err := os.ReadFile(filepath.Join(runs, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"shard1-run", "shard2-run", "shard2-unchecked"} {
		if !strings.Contains(string(idx), id+"/report.html") {
			t.Errorf("index lacks %s", id)
		}
	}
	j, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(j), "<testsuite "); n != 3 {
		t.Errorf("junit has %d testsuites, want 3 (one per run of every shard)\n%s", n, j)
	}
	if !strings.Contains(string(j), "not checked") || !strings.Contains(string(j), `type="invalid"`) {
		t.Errorf("junit lacks the unchecked run's error or the failures:\n%s", j)
	}
	if _, err := os.Stat(filepath.Join(runs, "shard1-run", "report.html")); err == nil {
		t.Error("index-only mode re-rendered a report")
	}
	if out, code := runCLI(t, "report"); code != exitBad || !strings.Contains(out, "--index") {
		t.Errorf("report with neither RUN_DIR nor --index: exit %d, %q", code, out)
	}
}
