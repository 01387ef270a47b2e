// Package regressions owns kept regression histories: trimming a failing
// run's history down to what one checker needs to fail, storing it under
// testdata/regressions/NAME/ with the verdicts it must keep producing, and
// loading those back so `go test ./...` re-checks every kept run without
// Docker. It reads and writes history files and runs checkers; it never
// starts containers and never changes how a checker judges.
package regressions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
)

// ExpectedFile holds a kept run's expected verdicts, next to its history/.
const ExpectedFile = "expected.json"

// Expected is what a kept run must keep producing.
type Expected struct {
	// Checker is the checker that failed in the original run; on the kept
	// history it must still say invalid.
	Checker string `json:"checker"`
	// Verdict of Checker (always invalid for a kept failure).
	Verdict checkers.Verdict `json:"verdict"`
	// Explanation is Checker's explanation on the kept history, for people.
	Explanation string `json:"explanation"`
	// Verdicts is every checker's verdict on the kept history; a checker
	// change that moves any of them shows up in the regression test.
	Verdicts map[string]checkers.Verdict `json:"verdicts"`
	// Source is the run the history came from, with its size.
	SourceRun      string    `json:"source_run"`
	SourceEvents   int       `json:"source_events"`
	KeptEvents     int       `json:"kept_events"`
	KeptAt         time.Time `json:"kept_at"`
	ContextEvents  int       `json:"context_events"`
	CheckerChecks  int       `json:"checker_checks"`
	OriginalReason string    `json:"original_explanation"`
}

// Options tune Trim.
type Options struct {
	// Checker to keep failing; "" picks the first invalid one.
	Checker string
	// Context is how many events on each side of every event the checker
	// blames are kept whatever the reduction says, so a reader sees what
	// happened around the violation (client operations only around a
	// blamed client operation). Default 10.
	Context int
	// MaxChecks bounds how many times the checker runs during reduction.
	// Default 400.
	MaxChecks int
	Config    checkers.Config
}

// Trimmed is Trim's result.
type Trimmed struct {
	Events   []history.Event // in merged order, Index renumbered
	Expected Expected
}

// ErrNothingToKeep is returned for a run no checker finds invalid.
var ErrNothingToKeep = errors.New("no checker finds the run invalid: nothing to keep")

// Trim reduces h to a sub-history on which the failing checker is still
// invalid. The events that checker blames, and Context events either side
// of each, are always kept. The rest is removed greedily, verified by
// re-running the checker at every step: first whole streams (one source's
// events of one kind), then halves, quarters, ... of what remains of each
// stream (delta debugging's complement step). The result is 1-minimal only
// up to MaxChecks; it always still fails. A cancelled ctx stops the
// reduction and Trim returns ctx's error: nothing half-trimmed is kept.
func Trim(ctx context.Context, h *history.History, opt Options) (*Trimmed, error) {
	if opt.Context == 0 {
		opt.Context = 10
	}
	if opt.MaxChecks == 0 {
		opt.MaxChecks = 400
	}
	all := checkers.All(opt.Config)
	target, orig, err := failingChecker(h, all, opt.Checker)
	if err != nil {
		return nil, err
	}

	n := len(h.Events)
	partner := partners(h)
	pinned := pinBlamed(h, orig, partner, opt.Context)
	keep := make([]bool, n)
	for i := range keep {
		keep[i] = true
	}
	// The other checkers that did not fail on the run must not fail on the
	// kept history either: a regression that fails for a reason the run
	// never had would mislead whoever reads it.
	var guards []checkers.Checker
	for _, c := range all {
		if c.Name() != target.Name() && c.Check(h).Verdict != checkers.Invalid {
			guards = append(guards, c)
		}
	}
	checks := 0
	stillFails := func(candidate []bool) bool {
		checks++
		kh := history.New(pick(h.Events, candidate))
		if target.Check(kh).Verdict != checkers.Invalid {
			return false
		}
		for _, g := range guards {
			if g.Check(kh).Verdict == checkers.Invalid {
				return false
			}
		}
		return true
	}

	streams, keys := unpinnedStreams(h, pinned)
	try := func(idx []int) bool {
		if checks >= opt.MaxChecks || len(idx) == 0 || ctx.Err() != nil {
			return false
		}
		cand := slices.Clone(keep)
		for _, i := range idx {
			cand[i] = false
			if p := partner[i]; p >= 0 && !pinned[p] {
				cand[p] = false
			}
		}
		if stillFails(cand) {
			keep = cand
			return true
		}
		return false
	}
	var left [][]int
	for _, k := range keys {
		if !try(streams[k]) {
			left = append(left, streams[k])
		}
	}
	for _, idx := range left {
		for size := len(idx) / 2; size >= 1 && checks < opt.MaxChecks; size /= 2 {
			for start := 0; start < len(idx) && checks < opt.MaxChecks; start += size {
				chunk := idx[start:min(start+size, len(idx))]
				live := chunk[:0:0]
				for _, i := range chunk {
					if keep[i] {
						live = append(live, i)
					}
				}
				try(live)
			}
		}
	}

	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("trim: %w", err)
	}
	kept := pick(h.Events, keep)
	kh := history.New(kept)
	final := target.Check(kh)
	if final.Verdict != checkers.Invalid { // cannot happen: every step was verified
		return nil, fmt.Errorf("trimmed history no longer fails %s", target.Name())
	}
	results, _ := checkers.Run(kh, all)
	ex := Expected{
		Checker: target.Name(), Verdict: final.Verdict, Explanation: final.Explanation,
		Verdicts: map[string]checkers.Verdict{}, SourceEvents: n, KeptEvents: len(kept),
		ContextEvents: opt.Context, CheckerChecks: checks, OriginalReason: orig.Explanation,
	}
	for _, r := range results {
		ex.Verdicts[r.Checker] = r.Verdict
	}
	return &Trimmed{Events: kh.Events, Expected: ex}, nil
}

// failingChecker returns the first checker of all that finds h invalid
// (only the one called name, when name is set) and its result.
func failingChecker(h *history.History, all []checkers.Checker, name string) (target checkers.Checker, orig checkers.Result, err error) {
	for _, c := range all {
		if name != "" && c.Name() != name {
			continue
		}
		r := c.Check(h)
		if r.Verdict == checkers.Invalid {
			target, orig = c, r
			break
		}
		if name != "" {
			return nil, orig, fmt.Errorf("checker %s says %s on this run, not invalid: nothing to keep", c.Name(), r.Verdict)
		}
	}
	if target == nil {
		if name != "" {
			return nil, orig, fmt.Errorf("unknown checker %q (known: %s)", name, checkerNames(all))
		}
		return nil, orig, ErrNothingToKeep
	}
	return target, orig, nil
}

// partners pairs the events that are kept or removed together (-1: none).
func partners(h *history.History) []int {
	n := len(h.Events)
	// A client operation is an invoke and its completion; keeping one half
	// would make an operation the run never had, so both go or stay (and
	// the reduction removes both of a pair together).
	partner := make([]int, n)
	for i := range partner {
		partner[i] = -1
	}
	ops, _ := history.Operations(h)
	for _, o := range ops {
		if o.Invoke != nil && o.Complete != nil {
			partner[o.Invoke.Index], partner[o.Complete.Index] = o.Complete.Index, o.Invoke.Index
		}
	}
	// A fault's start and stop likewise: a fault that never stops reads as
	// one the nemesis failed to heal.
	starts := map[string]int{}
	for i, e := range h.Events {
		if e.Fault == nil || e.Fault.ID == "" {
			continue
		}
		k := e.Source + "\x00" + e.Fault.ID
		switch e.Kind {
		case history.KindFaultStart:
			starts[k] = i
		case history.KindFaultStop:
			if j, ok := starts[k]; ok && partner[j] < 0 {
				partner[i], partner[j] = j, i
			}
		}
	}
	return partner
}

// pinBlamed marks the events orig blames and around events either side of
// each, with their partners.
func pinBlamed(h *history.History, orig checkers.Result, partner []int, around int) []bool {
	n := len(h.Events)
	pinned := make([]bool, n)
	blamed := slices.Clone(orig.Events)
	for _, v := range orig.Violations {
		blamed = append(blamed, v.Events...)
	}
	for _, i := range blamed {
		// Client operations around a control-plane violation are
		// incidental (reads pinned without the writes they saw would be
		// a new anomaly); around a client-side violation they are the
		// story.
		opsToo := h.Events[i].Kind == history.KindOp
		for j := max(0, i-around); j <= min(n-1, i+around); j++ {
			if h.Events[j].Kind == history.KindOp && !opsToo && j != i {
				continue
			}
			pinned[j] = true
			if partner[j] >= 0 {
				pinned[partner[j]] = true
			}
		}
	}
	return pinned
}

// unpinnedStreams groups the events not pinned by stream, and returns the
// streams' keys biggest first: dropping a big one early makes every later
// check cheaper.
func unpinnedStreams(h *history.History, pinned []bool) (map[string][]int, []string) {
	streams := map[string][]int{}
	for i, e := range h.Events {
		if !pinned[i] {
			// Client operations are one stream across clients: a read
			// returns what other clients wrote, so one client's ops
			// rarely make sense without the others'.
			k := e.Source + "\x00" + string(e.Kind)
			if e.Kind == history.KindOp {
				k = string(e.Kind)
			}
			streams[k] = append(streams[k], i)
		}
	}
	keys := make([]string, 0, len(streams))
	for k := range streams {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if len(streams[keys[a]]) != len(streams[keys[b]]) {
			return len(streams[keys[a]]) > len(streams[keys[b]])
		}
		return keys[a] < keys[b]
	})
	return streams, keys
}

func pick(evs []history.Event, keep []bool) []history.Event {
	out := make([]history.Event, 0, len(evs))
	for i, e := range evs {
		if keep[i] {
			out = append(out, e)
		}
	}
	return out
}

func checkerNames(cs []checkers.Checker) string {
	var s string
	for i, c := range cs {
		if i > 0 {
			s += ", "
		}
		s += c.Name()
	}
	return s
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

// ValidName reports whether name can be a regression folder: lower case
// letters, digits, '.', '_' and '-', starting with a letter or digit.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("regression name %q: use lower case letters, digits, '.', '_' and '-' (e.g. kafka-532-zombie)", name)
	}
	return nil
}

// Save writes t into dir (which must not exist yet): history/<source>.jsonl
// with the kept events, each with its original time and node, and
// expected.json. Files the run had next to its history that explain it
// (run.json, schedule.json) are copied from runDir when present.
func Save(dir, runDir string, t *Trimmed) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s already exists: choose another name or remove it", dir)
	}
	if err := history.WriteDir(dir, t.Events); err != nil {
		return fmt.Errorf("keep %s: %w", dir, err)
	}
	for _, name := range []string{"run.json", "schedule.json"} {
		if b, err := os.ReadFile(filepath.Join(runDir, name)); err == nil {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				return fmt.Errorf("keep: %w", err)
			}
		}
	}
	ex := t.Expected
	ex.SourceRun = filepath.Base(filepath.Clean(runDir))
	ex.KeptAt = time.Now().UTC().Truncate(time.Second)
	b, err := json.MarshalIndent(ex, "", "  ")
	if err != nil {
		return fmt.Errorf("keep: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ExpectedFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("keep: %w", err)
	}
	return nil
}

// Load reads a kept run's expected verdicts.
func Load(dir string) (Expected, error) {
	var ex Expected
	p := filepath.Join(dir, ExpectedFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return ex, fmt.Errorf("regression: %w", err)
	}
	if err := json.Unmarshal(b, &ex); err != nil {
		return ex, fmt.Errorf("%s: %w", p, err)
	}
	if ex.Checker == "" || len(ex.Verdicts) == 0 {
		return ex, fmt.Errorf("%s: names no checker or verdicts", p)
	}
	return ex, nil
}

// Recheck re-runs every checker on the kept run in dir and returns an error
// naming each checker whose verdict moved from expected.json, and each
// checker newer than the kept run that finds it invalid.
func Recheck(dir string, cfg checkers.Config) error {
	ex, err := Load(dir)
	if err != nil {
		return err
	}
	h, err := history.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("regression %s: %w", dir, err)
	}
	results, _ := checkers.Run(h, checkers.All(cfg))
	var errs []error
	seen := map[string]bool{}
	for _, r := range results {
		seen[r.Checker] = true
		want, ok := ex.Verdicts[r.Checker]
		if !ok {
			// A checker added after the run was kept has no expectation;
			// the kept history must not fail it, or the new checker (or
			// the history) needs a look.
			if r.Verdict == checkers.Invalid {
				errs = append(errs, fmt.Errorf("%s: checker %s, newer than %s, says invalid: %s", dir, r.Checker, ExpectedFile, r.Explanation))
			}
			continue
		}
		if r.Verdict != want {
			errs = append(errs, fmt.Errorf("%s: %s says %s, %s expects %s: %s", dir, r.Checker, r.Verdict, ExpectedFile, want, r.Explanation))
		}
		if r.Checker == ex.Checker && r.Verdict != ex.Verdict {
			errs = append(errs, fmt.Errorf("%s: the kept failure of %s is gone", dir, ex.Checker))
		}
	}
	for name := range ex.Verdicts {
		if !seen[name] {
			errs = append(errs, fmt.Errorf("%s: %s expects checker %s, which no longer exists", dir, ExpectedFile, name))
		}
	}
	return errors.Join(errs...)
}
