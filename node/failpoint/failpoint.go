// Package failpoint owns the node program's named failpoints: the exact
// windows a reproduction needs to hit (e.g. "controller wrote ZooKeeper but
// has not sent LeaderAndIsr"), armed at start from a flag or environment
// variable, or at run time over the admin HTTP port.
//
// It is a deliberately small stand-in for go.etcd.io/gofail's runtime: the
// node has a handful of windows, and gofail's code generation would add a build step
// for no gain. Actions are "sleep(DUR)", "error", "sigstop", "pause" and
// "off", optionally prefixed "N*" to fire only N times.
//
// sigstop: a process stops itself with SIGSTOP, as a GC pause would. The
// kernel ignores signals a PID-namespace init sends itself (verified: as PID
// 1, kill(getpid(), SIGSTOP) returns 0 and nothing happens), and the node is
// PID 1 in its container. So as PID 1 the failpoint reports that it is waiting
// and holds until SIGCONT arrives (the harness sends SIGSTOP then SIGCONT with
// `docker kill`, which comes from outside the namespace and works) or until it
// is released over HTTP.
//
// It must not know what the windows mean; callers name them.
package failpoint

import (
	"context"
	"errors"
	"fmt"
	"github.com/zkchaos/zkchaos/history"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The node program's failpoints (their meaning and order: history's
// Failpoint* constants, the contract with the harness).
const (
	ControllerAfterZKWrite             = history.FailpointControllerAfterZKWrite
	ControllerBeforeBrokerChange       = history.FailpointControllerBeforeBrokerChange
	BrokerBeforeRegister               = history.FailpointBrokerBeforeRegister
	BrokerControlledShutdown           = history.FailpointBrokerControlledShutdown
	BrokerAfterRegister                = history.FailpointBrokerAfterRegister
	FollowerAfterTruncation            = history.FailpointFollowerAfterTruncation
	ControllerBeforeElect              = history.FailpointControllerBeforeElect
	ControllerAfterElected             = history.FailpointControllerAfterElected
	ControllerBeforeSend               = history.FailpointControllerBeforeSend
	ControllerBeforeControlledShutdown = history.FailpointControllerBeforeControlledShutdown
	LeaderBeforeTxnAppend              = history.FailpointLeaderBeforeTxnAppend
)

// Names lists every failpoint, in history.FailpointNames' order.
var Names = history.FailpointNames

// ErrInjected is returned by Eval for the "error" action.
var ErrInjected = errors.New("failpoint: injected error")

// Action kinds.
const (
	ActSleep   = "sleep"
	ActError   = "error"
	ActSigstop = "sigstop"
	ActPause   = "pause"
	ActOff     = "off"
)

// Action is a parsed failpoint action.
type Action struct {
	Kind  string
	Sleep time.Duration
	Count int // fire at most Count times; 0 means always
}

func (a Action) String() string {
	s := a.Kind
	if a.Kind == ActSleep {
		s = "sleep(" + a.Sleep.String() + ")"
	}
	if a.Count > 0 {
		s = strconv.Itoa(a.Count) + "*" + s
	}
	return s
}

// ParseAction parses "sleep(500ms)", "sleep(500)" (milliseconds), "error",
// "return" (alias of error), "sigstop", "pause", "off", each optionally
// prefixed with "N*".
func ParseAction(s string) (Action, error) {
	s = strings.TrimSpace(s)
	var a Action
	if i := strings.Index(s, "*"); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil || n <= 0 {
			return a, fmt.Errorf("failpoint action %q: bad count", s)
		}
		a.Count, s = n, s[i+1:]
	}
	switch {
	case s == ActError || s == "return" || strings.HasPrefix(s, "return("):
		a.Kind = ActError
	case s == ActSigstop, s == ActPause, s == ActOff:
		a.Kind = s
	case strings.HasPrefix(s, "sleep(") && strings.HasSuffix(s, ")"):
		arg := s[len("sleep(") : len(s)-1]
		d, err := time.ParseDuration(arg)
		if err != nil {
			ms, err2 := strconv.Atoi(arg)
			if err2 != nil {
				return a, fmt.Errorf("failpoint action %q: bad duration", s)
			}
			d = time.Duration(ms) * time.Millisecond
		}
		if d < 0 || d > time.Hour {
			return a, fmt.Errorf("failpoint action %q: duration out of range", s)
		}
		a.Kind, a.Sleep = ActSleep, d
	default:
		return a, fmt.Errorf("failpoint action %q: want sleep(DUR), error, sigstop, pause or off", s)
	}
	return a, nil
}

// Hit describes one firing, for the event log.
type Hit struct {
	Name   string
	Action Action
	Seq    int    // 1 for the first firing of this arming
	Phase  string // "start" or "stop"
	Detail string
}

type point struct {
	action  Action
	fired   int
	release chan struct{} // closed to release holds (pause, sigstop as PID 1)
}

// Registry holds the armed failpoints of one process.
type Registry struct {
	// OnHit hears every firing at its start and its end. It is called
	// synchronously, so an event is on disk before the action begins.
	OnHit func(Hit)

	mu     sync.Mutex
	points map[string]*point
	getpid func() int
}

// New returns an empty registry.
func New() *Registry { return &Registry{points: map[string]*point{}, getpid: os.Getpid} }

// Arm arms name with action (an "off" action disarms it).
func (r *Registry) Arm(name string, a Action) error {
	if !slices.Contains(Names, name) {
		return fmt.Errorf("unknown failpoint %q (known: %s)", name, strings.Join(Names, ", "))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.points[name]; ok {
		close(old.release)
		delete(r.points, name)
	}
	if a.Kind != ActOff {
		r.points[name] = &point{action: a, release: make(chan struct{})}
	}
	return nil
}

// Disarm disarms name and releases anything it holds.
func (r *Registry) Disarm(name string) error { return r.Arm(name, Action{Kind: ActOff}) }

// Release lets every holder of name go on without disarming it.
func (r *Registry) Release(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.points[name]
	if !ok {
		return fmt.Errorf("failpoint %q is not armed", name)
	}
	close(p.release)
	p.release = make(chan struct{})
	return nil
}

// ArmSpec arms "name=action;name=action" (also separated by commas or
// newlines).
func (r *Registry) ArmSpec(spec string) error {
	for _, part := range strings.FieldsFunc(spec, func(c rune) bool { return c == ';' || c == '\n' || c == ',' }) {
		name, act, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("failpoint %q: want name=action", part)
		}
		a, err := ParseAction(act)
		if err != nil {
			return err
		}
		if err := r.Arm(strings.TrimSpace(name), a); err != nil {
			return err
		}
	}
	return nil
}

// OnceFile is the file in the node's data directory that arms failpoints
// for the next process start only: the harness writes it while the node is
// down, the node arms what it says and deletes it. Arming over HTTP after a
// restart races the start-up (broker-before-register is usually passed
// before the admin port has been asked), and the environment of a container
// cannot change between restarts.
const OnceFile = "failpoints.once"

// ArmOnceFile arms the spec in path (ArmSpec syntax) and removes the file,
// so the next start does not arm it again. A missing file arms nothing.
func (r *Registry) ArmOnceFile(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failpoints file: %w", err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("failpoints file: %w", err)
	}
	if err := r.ArmSpec(string(b)); err != nil {
		return fmt.Errorf("failpoints file %s: %w", path, err)
	}
	return nil
}

// Armed returns name → action for every armed failpoint.
func (r *Registry) Armed() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	for n, p := range r.points {
		out[n] = p.action.String()
	}
	return out
}

// ArmedNames returns the armed failpoints, sorted.
func (r *Registry) ArmedNames() []string {
	m := r.Armed()
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Eval runs name's action if it is armed: it returns ErrInjected for
// "error", nil otherwise (after sleeping, stopping or holding). A nil
// registry does nothing.
func (r *Registry) Eval(ctx context.Context, name string) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	p, ok := r.points[name]
	if !ok {
		r.mu.Unlock()
		return nil
	}
	if p.action.Count > 0 && p.fired >= p.action.Count {
		r.mu.Unlock()
		return nil
	}
	p.fired++
	hit := Hit{Name: name, Action: p.action, Seq: p.fired}
	release := p.release
	r.mu.Unlock()

	var err error
	switch hit.Action.Kind {
	case ActSleep:
		r.report(hit, "start", "")
		select {
		case <-time.After(hit.Action.Sleep):
		case <-release:
		case <-ctx.Done():
		}
	case ActError:
		r.report(hit, "start", "returning injected error")
		err = fmt.Errorf("%s: %w", name, ErrInjected)
	case ActPause:
		r.report(hit, "start", "holding until released over HTTP or disarmed")
		select {
		case <-release:
		case <-ctx.Done():
		}
	case ActSigstop:
		if r.getpid() != 1 {
			r.report(hit, "start", "SIGSTOP self")
			if kerr := syscall.Kill(r.getpid(), syscall.SIGSTOP); kerr != nil {
				err = fmt.Errorf("%s: SIGSTOP self: %w", name, kerr)
			}
			break
		}
		// PID 1 cannot stop itself: wait to be stopped and continued from
		// outside (SIGCONT ends the hold) or released.
		cont := make(chan os.Signal, 1)
		signal.Notify(cont, syscall.SIGCONT)
		r.report(hit, "start", "pid 1 cannot SIGSTOP itself: awaiting external SIGSTOP; holding until SIGCONT or release")
		select {
		case <-cont:
		case <-release:
		case <-ctx.Done():
		}
		signal.Stop(cont)
	}
	r.report(hit, "stop", "")
	return err
}

func (r *Registry) report(h Hit, phase, detail string) {
	if r.OnHit == nil {
		return
	}
	h.Phase, h.Detail = phase, detail
	r.OnHit(h)
}
