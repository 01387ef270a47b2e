package reports

import (
	"bytes"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/rundir/rundirtest"
)

// junitDoc mirrors the JUnit shape CI tools read, decoded independently of
// the writer's own types.
type junitDoc struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Skipped  int    `xml:"skipped,attr"`
		Props    []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name    string `xml:"name,attr"`
			Class   string `xml:"classname,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestJUnit(t *testing.T) {
	results := func(vs ...checkers.Verdict) *rundir.Results {
		r := &rundir.Results{Schema: rundir.ResultsSchema, Verdict: checkers.Valid}
		for i, v := range vs {
			cr := checkers.Result{Checker: []string{"controller-fencing", "durability", "linearizable"}[i], Verdict: v, Explanation: "because <" + string(v) + "> & so"}
			if v == checkers.Invalid {
				cr.Violations = []checkers.Violation{{Explanation: "epoch 1 after 2", Events: []int{3, 9}}}
			}
			r.Results = append(r.Results, cr)
			r.Verdict = checkers.Combine(r.Verdict, v)
		}
		return r
	}
	runs := []RunSummary{
		{ID: "a", Dir: "runs/a", Seed: 7, HasSeed: true, Bugs: []string{"KAFKA-532"}, Results: results(checkers.Invalid, checkers.Valid, checkers.Unknown),
			Replay: "chaos run --seed 7 --replay runs/a/schedule.json", Report: "runs/a/report.html", Time: time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)},
		{ID: "b", Dir: "runs/b", Seed: 8, HasSeed: true, Results: results(checkers.Valid, checkers.Valid, checkers.Valid)},
		{ID: "c", Dir: "runs/c"},                                   // never checked
		{ID: "d", Dir: "runs/d", Problem: "harness: setup failed"}, // the harness gave up
	}
	cases := []struct {
		name                    string
		opt                     JUnitOptions
		tests, fail, errs, skip int
		unknownIsErr            bool
	}{
		{"unknown skipped", JUnitOptions{}, 8, 1, 2, 1, false},
		{"unknown as error", JUnitOptions{UnknownAsError: true}, 8, 1, 3, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteJUnitWith(&buf, runs, c.opt); err != nil {
				t.Fatal(err)
			}
			var doc junitDoc
			if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatalf("not XML: %v\n%s", err, buf.String())
			}
			if doc.Tests != c.tests || doc.Failures != c.fail || doc.Errors != c.errs || doc.Skipped != c.skip {
				t.Fatalf("totals tests=%d failures=%d errors=%d skipped=%d\n%s", doc.Tests, doc.Failures, doc.Errors, doc.Skipped, buf.String())
			}
			if len(doc.Suites) != 4 {
				t.Fatalf("%d suites", len(doc.Suites))
			}
			a := doc.Suites[0]
			if a.Name != "run a (seed 7)" || len(a.Cases) != 3 || a.Failures != 1 {
				t.Fatalf("suite a: %+v", a)
			}
			f := a.Cases[0].Failure
			if f == nil || f.Message != "because <invalid> & so" || !strings.Contains(f.Text, "replay: chaos run --seed 7 --replay runs/a/schedule.json") ||
				!strings.Contains(f.Text, "epoch 1 after 2 (events 3, 9)") {
				t.Fatalf("failure: %+v", f)
			}
			if a.Cases[1].Failure != nil || a.Cases[1].Error != nil || a.Cases[1].Skipped != nil {
				t.Fatal("valid checker is not a pass")
			}
			u := a.Cases[2]
			if c.unknownIsErr != (u.Error != nil) || c.unknownIsErr == (u.Skipped != nil) {
				t.Fatalf("unknown: %+v", u)
			}
			props := map[string]string{}
			for _, p := range a.Props {
				props[p.Name] = p.Value
			}
			if props["seed"] != "7" || props["bugs"] != "KAFKA-532" || props["report"] != "runs/a/report.html" {
				t.Fatalf("properties %v", props)
			}
			if s := doc.Suites[2]; len(s.Cases) != 1 || s.Cases[0].Error == nil || !strings.Contains(s.Cases[0].Error.Message, "not checked") {
				t.Fatalf("unchecked run: %+v", s)
			}
			if s := doc.Suites[3]; s.Cases[0].Error == nil || s.Cases[0].Error.Message != "harness: setup failed" {
				t.Fatalf("harness problem: %+v", s)
			}
		})
	}
}

// runsFolder builds a runs folder: an invalid checked run, an unchecked
// one, one with corrupt results, and a directory that is not a run.
func runsFolder(t *testing.T) string {
	t.Helper()
	runs := t.TempDir()
	mk := func(name string) string {
		dir := rundirtest.Copy(t, kafka532)
		to := filepath.Join(runs, name)
		if err := os.Rename(dir, to); err != nil {
			t.Fatal(err)
		}
		return to
	}
	inv := mk("20261202-010000-aaaaaa")
	writeRunInfo(t, inv, sampleInfo("20261202-010000-aaaaaa"))
	check(t, inv)
	mk("20261202-020000-bbbbbb")
	bad := mk("20261202-030000-cccccc")
	os.WriteFile(filepath.Join(bad, rundir.ResultsFile), []byte("{"), 0o644)
	os.MkdirAll(filepath.Join(runs, "not-a-run"), 0o755)
	os.WriteFile(filepath.Join(runs, "stray.txt"), []byte("x"), 0o644)
	// Deterministic times: bbbbbb newest.
	for name, h := range map[string]int{"20261202-010000-aaaaaa": 1, "20261202-020000-bbbbbb": 3, "20261202-030000-cccccc": 2} {
		tm := time.Date(2026, 12, 2, h, 0, 0, 0, time.UTC)
		os.Chtimes(filepath.Join(runs, name), tm, tm)
		os.Chtimes(filepath.Join(runs, name, rundir.RunFile), tm, tm)
	}
	return runs
}

func TestIndex(t *testing.T) {
	runs := runsFolder(t)
	idx, err := Index(runs)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range idx {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, " ") != "20261202-020000-bbbbbb 20261202-030000-cccccc 20261202-010000-aaaaaa" {
		t.Fatalf("order %v", ids)
	}
	if idx[0].Verdict != NotChecked || idx[1].Problem == "" || !strings.Contains(idx[1].Problem, rundir.ResultsFile) {
		t.Fatalf("entries %+v %+v", idx[0], idx[1])
	}
	a := idx[2]
	if a.Verdict != "invalid" || a.Seed != 42 || !a.HasSeed || strings.Join(a.Bugs, ",") != "KAFKA-532" || len(a.Failing()) == 0 {
		t.Fatalf("invalid run %+v", a)
	}
	var buf bytes.Buffer
	if err := WriteIndexHTML(&buf, "runs", idx); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`href="20261202-010000-aaaaaa/report.html"`, "1 invalid", "KAFKA-532", "controller-fencing, leader-uniqueness", "not checked"} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("index lacks %q", w)
		}
	}
	if _, err := Index(filepath.Join(runs, "missing")); err == nil {
		t.Fatal("missing runs dir: no error")
	}
	p, err := WriteIndexFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if !strings.Contains(string(b), `href="20261202-010000-aaaaaa/report.html"`) {
		t.Fatal("static index lacks the run's link")
	}
	if strings.Contains(string(b), "chaos power") {
		t.Fatal("index shows a power table the folder does not have")
	}
	// A folder `chaos power` wrote shows its table above the runs.
	table := "switch     caught  checker\nKAFKA-532  3/5     controller-fencing 3 <&>\n"
	if err := os.WriteFile(filepath.Join(runs, PowerFile), []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteIndexFile(runs); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(p)
	if !strings.Contains(string(b), "KAFKA-532  3/5     controller-fencing 3 &lt;&amp;&gt;") {
		t.Fatalf("static index lacks the power table:\n%s", b)
	}
}

func TestServe(t *testing.T) {
	runs := runsFolder(t)
	srv, err := NewServer(runs)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	srv.Logf = func(f string, a ...any) { logs.WriteString(f + "\n") }
	ts := httptest.NewServer(srv)
	defer ts.Close()
	get := func(method, p string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+p, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	run := "/20261202-010000-aaaaaa/"
	cases := []struct {
		method, path string
		code         int
		want         string
	}{
		{"GET", "/", 200, "20261202-010000-aaaaaa/report.html"},
		{"GET", run + "report.html", 200, "broker-fencing"}, // rendered on demand
		{"GET", run + "results.json", 200, `"verdict": "invalid"`},
		{"GET", run + "history/", 200, "n1.jsonl"},
		{"GET", "/20261202-020000-bbbbbb/report.html", 200, "Not checked yet"},
		{"GET", "/20261202-030000-cccccc/report.html", 500, rundir.ResultsFile},
		{"GET", "/../../etc/passwd", 404, ""},
		{"GET", "/nope/report.html", 404, ""},
		{"POST", run + "report.html", 405, "read-only"},
		{"DELETE", run + "results.json", 405, ""},
	}
	for _, c := range cases {
		code, body := get(c.method, c.path)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d, want %d with %q; body %.200s", c.method, c.path, code, c.code, c.want, body)
		}
	}
	// A newer results.json makes the report outdated; a fresh one is not.
	rd := filepath.Join(runs, "20261202-010000-aaaaaa")
	if ReportOutdated(rd) {
		t.Fatal("just-rendered report counts as outdated")
	}
	future := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(rd, rundir.ResultsFile), future, future)
	if !ReportOutdated(rd) {
		t.Fatal("report older than results.json is not outdated")
	}
	os.WriteFile(filepath.Join(rd, rundir.ReportFile), []byte("<html>old renderer</html>"), 0o644)
	os.Chtimes(filepath.Join(rd, rundir.ReportFile), future.Add(time.Hour), future.Add(time.Hour))
	if !ReportOutdated(rd) {
		t.Fatal("report of another renderer version is not outdated")
	}
	if _, err := NewServer(filepath.Join(runs, "missing")); err == nil {
		t.Fatal("missing runs dir: no error")
	}
}

func TestCheckListenAddr(t *testing.T) {
	cases := []struct {
		addr   string
		remote bool
		ok     bool
	}{
		{"127.0.0.1:8080", false, true},
		{"localhost:8080", false, true},
		{"[::1]:8080", false, true},
		{"127.0.0.2:0", false, true},
		{":8080", false, false},
		{"0.0.0.0:8080", false, false},
		{"10.1.2.3:8080", false, false},
		{"example.com:80", false, false},
		{"0.0.0.0:8080", true, true},
		{"127.0.0.1", false, false}, // no port
	}
	for _, c := range cases {
		err := CheckListenAddr(c.addr, c.remote)
		if (err == nil) != c.ok {
			t.Errorf("CheckListenAddr(%q, %v) = %v", c.addr, c.remote, err)
		}
	}
}
