package harness

// This file shows a person what a run is doing while it runs. Everything
// comes from what the run already records: the harness's own phase calls,
// and the history files, read as they grow (only the new bytes each time).
// Client files are only counted (ok, fail, info); the control-plane files
// (nodes, ZooKeeper watcher, nemesis, harness) are decoded and kept, so the
// faults active now can be paired and the control-plane safety checkers can
// run on the history so far.
//
// On a terminal a status line is redrawn in place under the ordinary lines;
// anywhere else (a CI log, a pipe, a file) only whole lines are written: one
// when a phase begins, one with its numbers when it ends, and one for the
// first violation seen live.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
)

// liveCheckers run during the run on the control-plane events written so
// far. Each judges a safety property from node and ZooKeeper events alone,
// so a violation in a prefix of the history stays a violation of the whole
// (an excuse they accept lies between the events they flag, in the same
// node's log). The client-side checkers need the whole run (durability and
// linearizability the final reads, availability and liveness the end of
// the heal) and run only at the end.
var liveCheckers = []checkers.Checker{checkers.ControllerFencing{}, checkers.LeaderUniqueness{}, checkers.HWCheckpoint{}}

const (
	ttyInterval   = 500 * time.Millisecond // status line redraw
	plainInterval = time.Second            // polling without a terminal (for the live check)
	checkInterval = 2 * time.Second        // live checks at most this often
	// checkShare bounds the live check's CPU: the next check waits at least
	// this many times as long as the last one took. A check costs about
	// 50 ms per 17,000 control-plane events (a 90 s run); long runs check
	// less often instead of taking a core from the cluster under test.
	checkShare = 20
	// settleMargin: the live check looks only at events at least this old,
	// so every source has written what happened up to then (the watcher
	// and the nodes write within milliseconds; a second leaves room).
	settleMargin = time.Second
	rateWindow   = 5 * time.Second
)

// counts are totals since the start of the run.
type counts struct {
	ok, fail, info int // completed client operations by outcome
	faults         int // faults started (nemesis and node failpoints)
}

func (c counts) ops() int { return c.ok + c.fail + c.info }

func (c counts) minus(o counts) counts {
	return counts{c.ok - o.ok, c.fail - o.fail, c.info - o.info, c.faults - o.faults}
}

// status is what the terminal's status line shows.
type status struct {
	Phase          string
	InPhase, Limit time.Duration // Limit: the phase's set length; 0 when it has none
	Run            time.Duration
	Faults         []string // active now
	Rate           float64  // completed operations per second, recently
	OK, Fail, Info int
	Violation      string // checker of the first violation seen live
}

// line renders s in at most width-1 columns (a line as wide as the terminal
// wraps on some terminals, and a wrapped status line cannot be redrawn).
func (s status) line(width int) string {
	var parts []string
	ph := s.Phase
	if ph == "" {
		ph = "starting"
	}
	if s.Limit > 0 {
		left := max(s.Limit-s.InPhase, 0)
		parts = append(parts, fmt.Sprintf("%s %s/%s, %s left", ph, short(s.InPhase), short(s.Limit), short(left)))
	} else {
		parts = append(parts, fmt.Sprintf("%s %s", ph, short(s.InPhase)))
	}
	parts = append(parts, "run "+short(s.Run))
	if len(s.Faults) == 0 {
		parts = append(parts, "no fault active")
	} else {
		parts = append(parts, "faults: "+strings.Join(s.Faults, ", "))
	}
	parts = append(parts, fmt.Sprintf("%.0f ops/s, %d ok, %d fail, %d unknown", s.Rate, s.OK, s.Fail, s.Info))
	if s.Violation != "" {
		parts = append(parts, "VIOLATION "+s.Violation)
	} else {
		parts = append(parts, "no violation so far")
	}
	return clip(strings.Join(parts, " │ "), width-1)
}

// clip cuts s to n runes, marking the cut.
func clip(s string, n int) string {
	if n < 1 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// short is a duration to the second (to the tenth under ten seconds).
func short(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// phaseBeginLine is the line that opens a phase.
func phaseBeginLine(at time.Time, name string, limit time.Duration) string {
	s := fmt.Sprintf("[%s] %s", at.Format("15:04:05.000"), name)
	if limit > 0 {
		s += fmt.Sprintf(" (%s)", limit)
	}
	return s + "\n"
}

// phaseEndLine is the line that closes a phase with what happened in it.
func phaseEndLine(at time.Time, name string, took time.Duration, d counts) string {
	s := fmt.Sprintf("[%s] %s done in %s", at.Format("15:04:05.000"), name, took.Round(time.Millisecond))
	var what []string
	if n := d.ops(); n > 0 {
		rate := ""
		if took > 0 {
			rate = fmt.Sprintf(" (%.0f/s)", float64(n)/took.Seconds())
		}
		what = append(what, fmt.Sprintf("%d ops%s: %d ok, %d fail, %d unknown", n, rate, d.ok, d.fail, d.info))
	}
	switch {
	case d.faults == 1:
		what = append(what, "1 fault injected")
	case d.faults > 1:
		what = append(what, fmt.Sprintf("%d faults injected", d.faults))
	}
	if len(what) > 0 {
		s += ": " + strings.Join(what, "; ")
	}
	return s + "\n"
}

// violationLine announces the first violation a live check found. The
// checker numbered events within the node and ZooKeeper events it was
// given, not within the whole history the report numbers, and says so.
func violationLine(at time.Time, checker, explanation string) string {
	return fmt.Sprintf("[%s] ! %s, seen live in the node and ZooKeeper events so far (event numbers count those only; the check after the run decides): %s\n",
		at.Format("15:04:05.000"), checker, explanation)
}

// progress is the run's progress output. It is an io.Writer too: every
// other line of the run (set-up steps, a scenario's notes) goes through it,
// so the status line is cleared before the line and redrawn after.
type progress struct {
	out io.Writer
	// log, when set, receives every line out does and never the status
	// line (the run directory's copy of the progress).
	log    io.Writer
	tty    bool
	width  func() int
	now    func() time.Time
	limits map[string]time.Duration

	tmu  sync.Mutex // the tailer: the poller and phase ends both read files
	tail *tailer

	mu        sync.Mutex
	start     time.Time
	phase     string
	phaseAt   time.Time
	began     map[string]counts // totals when each phase began
	beganAt   map[string]time.Time
	total     counts
	faults    []string
	samples   []sample // for the recent rate
	violation string
	lastCheck time.Time
	nextCheck time.Duration // wait after lastCheck
	checked   int           // control events the last live check saw
	shown     bool
	midLine   bool

	quit, done chan struct{}
}

type sample struct {
	at  time.Time
	ops int
}

// newProgress writes to out and follows the history files in dir. limits
// are the set lengths of phases (the workload's time limit). It does not
// start polling: start does.
func newProgress(out io.Writer, dir string, limits map[string]time.Duration) *progress {
	p := &progress{
		out: out, now: time.Now, limits: limits, tail: newTailer(dir),
		began: map[string]counts{}, beganAt: map[string]time.Time{},
		width: func() int { return 80 },
	}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb" {
		p.tty = true
		fd := int(f.Fd())
		p.width = func() int {
			if w, _, err := term.GetSize(fd); err == nil && w > 0 {
				return w
			}
			return 80
		}
	}
	p.start = p.now()
	return p
}

// run polls until stop.
func (p *progress) run() {
	p.quit, p.done = make(chan struct{}), make(chan struct{})
	every := plainInterval
	if p.tty {
		every = ttyInterval
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.tick()
			}
		}
	}()
}

// stop ends polling, takes the status line off the terminal and closes the
// files.
func (p *progress) stop() {
	if p.quit != nil {
		close(p.quit)
		<-p.done
	}
	p.mu.Lock()
	p.clearStatus()
	p.mu.Unlock()
	p.tmu.Lock()
	p.tail.close()
	p.tmu.Unlock()
}

// Write passes a line of the run's other output through.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearStatus()
	n, err := p.out.Write(b)
	if p.log != nil {
		p.log.Write(b)
	}
	p.midLine = len(b) > 0 && b[len(b)-1] != '\n'
	return n, err
}

// line writes one line of progress's own to out and the log.
func (p *progress) line(s string) {
	fmt.Fprint(p.out, s)
	if p.log != nil {
		fmt.Fprint(p.log, s)
	}
}

// poll reads what the history files gained and updates the totals.
func (p *progress) poll() {
	p.tmu.Lock()
	p.tail.poll()
	tot := p.tail.total
	active := p.tail.activeFaults()
	p.tmu.Unlock()
	p.mu.Lock()
	p.total = tot
	p.faults = active
	p.mu.Unlock()
}

// tick is one round of the poller: read, maybe check, redraw.
func (p *progress) tick() {
	p.poll()
	now := p.now()
	p.mu.Lock()
	p.samples = append(p.samples, sample{now, p.total.ops()})
	for len(p.samples) > 2 && now.Sub(p.samples[1].at) >= rateWindow {
		p.samples = p.samples[1:]
	}
	due := p.violation == "" && now.Sub(p.lastCheck) >= max(checkInterval, p.nextCheck)
	p.mu.Unlock()
	if due {
		p.checkLive(now)
	}
	p.mu.Lock()
	p.drawStatus()
	p.mu.Unlock()
}

// checkLive runs the live checkers on the control-plane events older than
// the settle margin, once there are new ones, and prints the first
// violation.
func (p *progress) checkLive(now time.Time) {
	p.tmu.Lock()
	n := p.tail.controlEvents()
	var sources [][]history.Event
	if n != p.checked {
		sources = p.tail.controlUpTo(now.Add(-settleMargin).UnixNano())
	}
	p.tmu.Unlock()
	p.mu.Lock()
	p.lastCheck = now
	p.checked = n
	p.mu.Unlock()
	if sources == nil {
		return
	}
	began := time.Now() // the real clock: this measures work, not run time
	checker, why, ok := firstViolation(sources)
	p.mu.Lock()
	p.nextCheck = checkShare * time.Since(began)
	p.mu.Unlock()
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.violation = checker
	p.clearStatus()
	p.line(violationLine(now, checker, why))
}

// firstViolation runs the live checkers on the merged sources.
func firstViolation(sources [][]history.Event) (checker, explanation string, ok bool) {
	h := history.Merge(sources...)
	for _, c := range liveCheckers {
		r := c.Check(h)
		if r.Verdict != checkers.Invalid {
			continue
		}
		why := r.Explanation
		if len(r.Violations) > 0 {
			why = r.Violations[0].Explanation
		}
		return r.Checker, why, true
	}
	return "", "", false
}

// phaseMark records a phase's begin or end: a line, and the numbers of the
// phase when it ends (the files are read first, so they are complete).
func (p *progress) phaseMark(name, mark string) {
	if mark == history.PhaseEnd {
		p.poll()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.clearStatus()
	if mark == history.PhaseBegin {
		p.phase, p.phaseAt = name, now
		p.began[name], p.beganAt[name] = p.total, now
		p.line(phaseBeginLine(now, name, p.limits[name]))
		return
	}
	from, ok := p.beganAt[name]
	if !ok {
		return
	}
	p.line(phaseEndLine(now, name, now.Sub(from), p.total.minus(p.began[name])))
}

// snapshot is the status line's state now.
func (p *progress) snapshot() status {
	now := p.now()
	s := status{
		Phase: p.phase, InPhase: now.Sub(p.phaseAt), Limit: p.limits[p.phase], Run: now.Sub(p.start),
		Faults: p.faults, OK: p.total.ok, Fail: p.total.fail, Info: p.total.info, Violation: p.violation,
	}
	if p.phase == "" {
		s.InPhase = s.Run
	}
	if n := len(p.samples); n >= 2 {
		a, b := p.samples[0], p.samples[n-1]
		if dt := b.at.Sub(a.at).Seconds(); dt > 0 {
			s.Rate = float64(b.ops-a.ops) / dt
		}
	}
	return s
}

func (p *progress) drawStatus() {
	if !p.tty || p.midLine {
		return
	}
	fmt.Fprint(p.out, "\r\x1b[K"+p.snapshot().line(p.width()))
	p.shown = true
}

func (p *progress) clearStatus() {
	if p.shown {
		fmt.Fprint(p.out, "\r\x1b[K")
		p.shown = false
	}
}

// tailer follows the history files of a run directory as they grow.
type tailer struct {
	files   *follower
	total   counts
	control map[string][]history.Event // per source, the control-plane events
	// faultEvs are the events that start or end faults, for pairing.
	faultEvs []history.Event
	skipped  int // lines that did not decode; the check after the run reports them
}

func newTailer(dir string) *tailer {
	return &tailer{files: newFollower(filepath.Join(dir, "*.jsonl")), control: map[string][]history.Event{}}
}

// poll reads what the files gained. Client files are only counted: they
// are most of the bytes of a run.
func (t *tailer) poll() { t.files.poll(t.line) }

// opLine is the part of a client line that counting needs.
type opLine struct {
	Kind history.Kind `json:"kind"`
	Op   *struct {
		Type history.OpType `json:"type"`
	} `json:"op"`
}

func (t *tailer) line(tf *followed, b []byte) {
	if len(bytes.TrimSpace(b)) == 0 {
		return
	}
	if tf.client {
		var l opLine
		if err := json.Unmarshal(b, &l); err != nil || l.Kind != history.KindOp || l.Op == nil {
			t.skipped++
			return
		}
		switch l.Op.Type {
		case history.OpOK:
			t.total.ok++
		case history.OpFail:
			t.total.fail++
		case history.OpInfo:
			t.total.info++
		}
		return
	}
	var e history.Event
	if err := json.Unmarshal(b, &e); err != nil || e.Validate() != nil {
		t.skipped++
		return
	}
	t.control[tf.source] = append(t.control[tf.source], e)
	switch e.Kind {
	case history.KindFaultStart:
		t.total.faults++
		t.faultEvs = append(t.faultEvs, e)
	case history.KindFaultStop, history.KindNodeStart, history.KindNodeStop, history.KindPhase:
		t.faultEvs = append(t.faultEvs, e)
	}
}

// activeFaults names the faults started and not yet ended, paired the way
// the report pairs them.
func (t *tailer) activeFaults() []string {
	w := history.FaultWindows{ProcessEnds: true, HealEnds: true}
	for i := range t.faultEvs {
		w.Add(&t.faultEvs[i])
	}
	var out []string
	for _, win := range w.Finish(0) {
		if win.Open {
			out = append(out, faultLabel(&win.Start))
		}
	}
	return out
}

// faultLabel is a fault as the status line names it: "pause n2",
// "failpoint beforeLeaderAndIsr on n3".
func faultLabel(e *history.Event) string {
	f := e.Fault
	if f.Failpoint != "" {
		return fmt.Sprintf("failpoint %s on %s", f.Failpoint, e.Source)
	}
	if len(f.Targets) == 0 {
		return f.Name
	}
	return f.Name + " " + strings.Join(f.Targets, ",")
}

func (t *tailer) controlEvents() int {
	n := 0
	for _, evs := range t.control {
		n += len(evs)
	}
	return n
}

// controlUpTo returns the control-plane events at or before cutoff (Unix
// ns), one slice per source, in a fixed source order.
func (t *tailer) controlUpTo(cutoff int64) [][]history.Event {
	names := make([]string, 0, len(t.control))
	for s := range t.control {
		names = append(names, s)
	}
	slices.Sort(names)
	out := make([][]history.Event, 0, len(names))
	for _, s := range names {
		var keep []history.Event
		for _, e := range t.control[s] {
			if e.Time <= cutoff {
				keep = append(keep, e)
			}
		}
		out = append(out, keep)
	}
	return out
}

func (t *tailer) close() { t.files.close() }
