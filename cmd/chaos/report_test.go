package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/reports"
	"github.com/zkchaos/zkchaos/rundir"
)

// storedRun copies testdata/kafka-532 into a temporary run directory,
// checked when check is true.
func storedRun(t *testing.T, check bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "kafka-532")
	copyDir(t, "testdata/kafka-532", dir)
	if check {
		if err := runCheck(io.Discard, dir, checkers.DefaultConfig()); exitCode(err) != exitInvalid {
			t.Fatalf("check: %v", err)
		}
	}
	return dir
}

func TestReportCommand(t *testing.T) {
	checked := storedRun(t, true)
	unchecked := storedRun(t, false)
	corrupt := storedRun(t, false)
	os.WriteFile(filepath.Join(corrupt, rundir.ResultsFile), []byte(`{"verdict":`), 0o644)
	cases := []struct {
		name    string
		dirs    []string
		junit   bool
		code    int
		inOut   []string
		inErr   string
		reports []string // dirs that must have report.html afterwards
	}{
		{name: "checked invalid run", dirs: []string{checked}, code: exitValid, inOut: []string{filepath.Join(checked, "report.html")}, reports: []string{checked}},
		{name: "unchecked run still renders", dirs: []string{unchecked}, code: exitValid, reports: []string{unchecked}},
		{name: "corrupt results is bad input", dirs: []string{corrupt}, code: exitBad, inErr: filepath.Join(corrupt, "results.json")},
		{name: "missing dir is bad input", dirs: []string{filepath.Join(checked, "nope")}, code: exitBad, inErr: "nope"},
		{name: "one bad run does not stop the others", dirs: []string{corrupt, checked}, code: exitBad, inErr: "results.json", reports: []string{checked}},
		{name: "junit for CI", dirs: []string{checked, unchecked}, junit: true, code: exitValid,
			inOut: []string{`<failure message="broker 2 accepted UpdateMetadata`, "report: ", "not checked"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, d := range c.reports {
				os.Remove(filepath.Join(d, rundir.ReportFile))
			}
			var out bytes.Buffer
			junit := ""
			if c.junit {
				junit = "-"
			}
			err := runReport(&out, c.dirs, junit, reports.JUnitOptions{})
			if got := exitCode(err); got != c.code {
				t.Fatalf("exit %d, want %d: %v", got, c.code, err)
			}
			if c.inErr != "" && !strings.Contains(err.Error(), c.inErr) {
				t.Errorf("error %q does not name %q", err, c.inErr)
			}
			for _, w := range c.inOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%.2000s", w, out.String())
				}
			}
			for _, d := range c.reports {
				if _, err := os.Stat(filepath.Join(d, rundir.ReportFile)); err != nil {
					t.Errorf("no report in %s", d)
				}
			}
			if c.junit {
				xmlPart := out.String()[strings.Index(out.String(), "<?xml"):]
				var doc struct {
					Suites []struct {
						Cases []struct {
							Name string `xml:"name,attr"`
						} `xml:"testcase"`
					} `xml:"testsuite"`
				}
				if err := xml.Unmarshal([]byte(xmlPart), &doc); err != nil || len(doc.Suites) != 2 || len(doc.Suites[0].Cases) != len(checkers.All(checkers.DefaultConfig())) {
					t.Fatalf("junit: %v %+v", err, doc)
				}
			}
		})
	}
}

// TestReportCommandExitCodeThroughCobra: the subcommand is registered and
// bad input maps to exit 2 through the real command tree.
func TestReportCommandExitCodeThroughCobra(t *testing.T) {
	root := newRootCmd()
	root.SetArgs([]string{"report", filepath.Join(t.TempDir(), "missing")})
	root.SetOut(io.Discard)
	err := root.Execute()
	if exitCode(err) != exitBad {
		t.Fatalf("exit %d: %v", exitCode(err), err)
	}
}

// syncBuffer is a bytes.Buffer safe for the server goroutine to write
// while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServeCommand(t *testing.T) {
	runs := filepath.Dir(storedRun(t, true))
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, &out, runs, "127.0.0.1:0", false) }()
	re := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		url = re.FindString(out.String())
	}
	if url == "" {
		cancel()
		t.Fatalf("server did not start: %s %v", out.String(), <-done)
	}
	for _, c := range []struct{ path, want string }{
		{"", "kafka-532/report.html"},
		{"kafka-532/report.html", "controller-fencing"},
	} {
		resp, err := http.Get(url + c.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), c.want) {
			t.Errorf("GET /%s: %d %.200s", c.path, resp.StatusCode, b)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve returned %v", err)
	}
}

func TestServeCommandRefusesRemote(t *testing.T) {
	cases := []struct {
		addr, dir string
		want      string
	}{
		{"0.0.0.0:0", "testdata", "not loopback"},
		{":0", "testdata", "not loopback"},
		{"127.0.0.1:0", "testdata/nope", "nope"},
	}
	for _, c := range cases {
		err := runServe(context.Background(), io.Discard, c.dir, c.addr, false)
		if exitCode(err) != exitBad || !strings.Contains(err.Error(), c.want) {
			t.Errorf("serve %s %s: exit %d %v", c.dir, c.addr, exitCode(err), err)
		}
	}
}

// TestReportCommandIndex: --index writes a static runs index next to the
// rendered reports.
func TestReportCommandIndex(t *testing.T) {
	run := storedRun(t, true)
	runs := filepath.Dir(run)
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"report", run, "--index", runs})
	if err := root.Execute(); err != nil {
		t.Fatalf("exit %d: %v", exitCode(err), err)
	}
	b, err := os.ReadFile(filepath.Join(runs, reports.IndexFile))
	if err != nil || !strings.Contains(string(b), "kafka-532/report.html") || !strings.Contains(out.String(), reports.IndexFile) {
		t.Fatalf("index: %v\n%s\n%s", err, b, out.String())
	}
}
