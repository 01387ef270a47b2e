package reports

// This file owns JUnit XML for CI: one <testsuite> per run, one <testcase>
// per checker. invalid is a <failure> carrying the explanation, the first
// violations and the replay command; unknown is <skipped> with its reason
// (Jepsen: unknown is not failure) unless JUnitOptions.UnknownAsError; a run
// never checked, or one the harness could not finish, is an <error>.

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/zkchaos/zkchaos/checkers"
)

// maxJUnitViolations bounds the violations listed in one failure message.
const maxJUnitViolations = 10

// JUnitOptions tunes how verdicts map to JUnit outcomes.
type JUnitOptions struct {
	// UnknownAsError reports an unknown verdict as <error> (CI turns red)
	// instead of <skipped>.
	UnknownAsError bool
	// Suite names the <testsuites> root; default "chaos".
	Suite string
}

// junitCounts are the totals both <testsuites> and each <testsuite> carry.
type junitCounts struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
	Skipped  int `xml:"skipped,attr"`
}

func (c *junitCounts) add(o junitCounts) {
	c.Tests += o.Tests
	c.Failures += o.Failures
	c.Errors += o.Errors
	c.Skipped += o.Skipped
}

type junitSuites struct {
	XMLName xml.Name `xml:"testsuites"`
	Name    string   `xml:"name,attr"`
	junitCounts
	Suites []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name string `xml:"name,attr"`
	junitCounts
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string `xml:"name,attr"`
	Classname string `xml:"classname,attr"`
	Time      string `xml:"time,attr"`
	// Outcome is the case's one <failure>, <error> or <skipped> element;
	// nil for a pass.
	Outcome *junitOutcome
}

// The outcomes a case can have, as their element names.
const (
	junitFailure = "failure"
	junitError   = "error"
	junitSkipped = "skipped"
)

// junitOutcome is a <failure>, <error> or <skipped> element, named by
// XMLName.
type junitOutcome struct {
	XMLName xml.Name
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",cdata"`
}

// WriteJUnit writes runs as JUnit XML with the default options.
func WriteJUnit(w io.Writer, runs []RunSummary) error {
	return WriteJUnitWith(w, runs, JUnitOptions{})
}

// WriteJUnitWith writes runs as JUnit XML.
func WriteJUnitWith(w io.Writer, runs []RunSummary, opt JUnitOptions) error {
	root := junitSuites{Name: opt.Suite}
	if root.Name == "" {
		root.Name = "chaos"
	}
	for _, r := range runs {
		s := junitSuiteOf(r, opt)
		root.add(s.junitCounts)
		root.Suites = append(root.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(root); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	return nil
}

func junitSuiteOf(r RunSummary, opt JUnitOptions) junitSuite {
	name := "run " + r.ID
	if r.HasSeed {
		name += fmt.Sprintf(" (seed %d)", r.Seed)
	}
	s := junitSuite{Name: name}
	if !r.Time.IsZero() {
		s.Timestamp = r.Time.UTC().Format("2006-01-02T15:04:05")
	}
	prop := func(k, v string) {
		if v != "" {
			s.Properties = append(s.Properties, junitProperty{k, v})
		}
	}
	if r.HasSeed {
		prop("seed", fmt.Sprint(r.Seed))
	}
	prop("bugs", strings.Join(r.Bugs, ","))
	prop("run_dir", r.Dir)
	prop("replay", r.Replay)
	prop("report", r.Report)
	class := "chaos." + r.ID
	tail := replayTail(r)
	// errorCase is a case the run could not pass or fail: msg says why.
	errorCase := func(name, typ, msg string) junitCase {
		return junitCase{Name: name, Classname: class, Time: "0",
			Outcome: outcome(junitError, msg, typ, msg+tail)}
	}
	switch {
	case r.Problem != "":
		s.Cases = append(s.Cases, errorCase("run", "harness", r.Problem))
	case r.Results == nil:
		s.Cases = append(s.Cases, errorCase("check", "not-checked", "not checked: the run has no results.json"))
	default:
		for _, cr := range r.Results.Results {
			c := junitCase{Name: cr.Checker, Classname: class, Time: "0"}
			switch cr.Verdict {
			case checkers.Valid:
			case checkers.Invalid:
				c.Outcome = outcome(junitFailure, cr.Explanation, "invalid", failureText(cr)+tail)
			default:
				as := junitSkipped
				if opt.UnknownAsError {
					as = junitError
				}
				c.Outcome = outcome(as, "unknown: "+cr.Explanation, "unknown", cr.Explanation+tail)
			}
			s.Cases = append(s.Cases, c)
		}
		if len(s.Cases) == 0 {
			s.Cases = append(s.Cases, errorCase("check", "not-checked", "results.json lists no checkers"))
		}
	}
	for _, c := range s.Cases {
		s.add(c.counts())
	}
	return s
}

// counts is the one test a case is, by its outcome.
func (c junitCase) counts() junitCounts {
	n := junitCounts{Tests: 1}
	if c.Outcome == nil {
		return n
	}
	switch c.Outcome.XMLName.Local {
	case junitFailure:
		n.Failures = 1
	case junitError:
		n.Errors = 1
	case junitSkipped:
		n.Skipped = 1
	}
	return n
}

func outcome(element, message, typ, text string) *junitOutcome {
	return &junitOutcome{XMLName: xml.Name{Local: element}, Message: message, Type: typ, Text: text}
}

// failureText lists the first violations of an invalid checker.
func failureText(cr checkers.Result) string {
	var b strings.Builder
	b.WriteString(cr.Explanation)
	if len(cr.Violations) > 0 {
		b.WriteString("\nviolations:")
		for i, v := range cr.Violations {
			if i == maxJUnitViolations {
				fmt.Fprintf(&b, "\n  … %d more", len(cr.Violations)-i+cr.Omitted)
				break
			}
			fmt.Fprintf(&b, "\n  - %s (events %s)", v.Explanation, intList(v.Events, 10))
		}
		if len(cr.Violations) <= maxJUnitViolations && cr.Omitted > 0 {
			fmt.Fprintf(&b, "\n  … %d more", cr.Omitted)
		}
	}
	return b.String()
}

func replayTail(r RunSummary) string {
	var b strings.Builder
	if r.Replay != "" {
		b.WriteString("\nreplay: " + r.Replay)
	}
	if r.Report != "" {
		b.WriteString("\nreport: " + r.Report)
	}
	return b.String()
}

func intList(xs []int, limit int) string {
	var parts []string
	for i, x := range xs {
		if i == limit {
			parts = append(parts, fmt.Sprintf("… %d more", len(xs)-i))
			break
		}
		parts = append(parts, fmt.Sprint(x))
	}
	return strings.Join(parts, ", ")
}
