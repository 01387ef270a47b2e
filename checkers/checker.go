package checkers

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/zkchaos/zkchaos/history"
)

// Verdict is a checker's decision.
type Verdict string

// The three verdicts. Combine ranks them invalid > unknown > valid.
const (
	Valid   Verdict = "valid"
	Invalid Verdict = "invalid"
	Unknown Verdict = "unknown"
)

// MaxViolations caps the violations a Result lists; the rest are counted.
const MaxViolations = 50

// Known anomaly names (KnownAnomaly.Name).
const (
	// KnownKafka2334: a read returned nothing at an offset below records
	// acknowledged before it began, answered by a leader that took the role
	// after them and whose high watermark lagged.
	KnownKafka2334 = "KAFKA-2334"
	// KnownDeposedLeaderRead: a read returned nothing at an offset below
	// records acknowledged before it began, answered by a leader at an
	// older epoch than theirs that had not yet been told it was deposed.
	KnownDeposedLeaderRead = "deposed-leader-read"
	// KnownDuplicateAppend: a produce's value appended at more than one
	// offset by a non-idempotent producer's resend (at-least-once).
	KnownDuplicateAppend = "duplicate-append"
	// KnownKafka3861: a controller left a partition without a leader for
	// longer than the grace while a registered broker held every
	// acknowledged record (no ISR member alive, unclean election off).
	KnownKafka3861 = "KAFKA-3861"
	// KnownQueuedShutdown: a controller acted on a ControlledShutdown that
	// a broker's previous process sent before its new one registered,
	// while the controller's cache still held the sender's epoch: KIP-380
	// compares with the cached epoch, and the controller takes requests
	// and broker changes in arrival order.
	KnownQueuedShutdown = "queued-controlled-shutdown"
)

// KnownAnomaly is documented Kafka behaviour a checker saw: its name, how
// often, and one example explained. It does not make a verdict invalid
// unless the checker runs in a strict mode for it.
type KnownAnomaly struct {
	Name    string `json:"name"`
	Count   int    `json:"count"`
	Example string `json:"example"`
	Events  []int  `json:"events,omitempty"`
}

// Violation is one anomaly: what went wrong, in a sentence, and the indices
// of the history events that show it.
type Violation struct {
	Explanation string `json:"explanation"`
	Events      []int  `json:"events"`
	// At, when set, is the time (as event times) from which the
	// violation holds, for one that an absence proves: nothing happened
	// within a grace (a partition without a leader, a controller still
	// retrying). Otherwise it holds from the latest of its events.
	At int64 `json:"at_ns,omitempty"`
}

// Result is what a checker concluded.
type Result struct {
	_ struct{}

	Checker string  `json:"checker"`
	Verdict Verdict `json:"verdict"`
	// Explanation is one sentence a person can act on: the first violation
	// (and how many more there are), why the checker could not decide, or
	// what it verified.
	Explanation string `json:"explanation"`
	// Events are the indices of the events involved, sorted, deduplicated.
	Events     []int       `json:"events,omitempty"`
	Violations []Violation `json:"violations,omitempty"`
	// Omitted counts violations beyond MaxViolations.
	Omitted int `json:"omitted_violations,omitempty"`
	// Known lists documented Kafka behaviour seen (not violations), by name.
	Known   []KnownAnomaly `json:"known_anomalies,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

// Checker is one property checked over a history.
type Checker interface {
	Name() string
	Check(h *history.History) Result
}

// Run runs each checker on h and returns their results in order and the
// combined verdict. The client operations are paired, the events indexed
// by kind, the partition states put in ZooKeeper order and the queue
// operations modelled, once for all of them (see operations, eventsOf,
// partitionStates and queueModelOf), and the checkers run
// concurrently, as many at a time as
// there are CPUs: they only read the history, and each result is the same
// whatever else runs beside it. Linearizable, the longest, starts first.
func Run(h *history.History, cs []Checker) ([]Result, Verdict) {
	ops, _ := history.Operations(h)
	paired.Store(h, ops)
	defer paired.Delete(h)
	// The kind index first: collecting the partition states walks it.
	kindIndexes.Store(h, buildKindIndex(h))
	defer kindIndexes.Delete(h)
	zkVersions.Store(h, collectPartitionStates(h))
	defer zkVersions.Delete(h)
	queueModels.Store(h, sync.OnceValue(func() *queueModel { return newQueueModel(h) }))
	defer queueModels.Delete(h)
	order := make([]int, 0, len(cs))
	for i, c := range cs {
		if _, ok := c.(Linearizable); ok {
			order = append([]int{i}, order...)
		} else {
			order = append(order, i)
		}
	}
	out := make([]Result, len(cs))
	next := make(chan int, len(order))
	for _, i := range order {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(cs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r := cs[i].Check(h)
				if r.Checker == "" {
					r.Checker = cs[i].Name()
				}
				out[i] = r
			}
		}()
	}
	wg.Wait()
	v := Valid
	for _, r := range out {
		v = Combine(v, r.Verdict)
	}
	return out, v
}

// paired holds the client operations of the histories Run is checking,
// by history: several checkers work from them, and pairing a million events
// again for each was a good part of a check's time and garbage.
var paired sync.Map // *history.History → []history.Operation

// operations returns h's client operations (history.Operations), paired
// once per Run; a checker called on its own pairs them itself. Checkers
// only read them.
func operations(h *history.History) []history.Operation {
	if v, ok := paired.Load(h); ok {
		return v.([]history.Operation)
	}
	ops, _ := history.Operations(h)
	return ops
}

// Combine ranks verdicts: invalid beats unknown beats valid.
func Combine(a, b Verdict) Verdict {
	rank := func(v Verdict) int {
		switch v {
		case Invalid:
			return 2
		case Unknown:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// report accumulates a checker's findings and turns them into a Result.
type report struct {
	name       string
	violations []Violation
	omitted    int
	unknown    []string // reasons the checker could not decide
	known      []KnownAnomaly
	// knownSaid: the ok sentence already names the known anomalies.
	knownSaid bool
	details   map[string]any
}

// knownAnomaly counts one occurrence of a named known anomaly, keeping the
// first one's explanation and events as the example.
func (r *report) knownAnomaly(name string, events []int, format string, args ...any) {
	for i := range r.known {
		if r.known[i].Name == name {
			r.known[i].Count++
			return
		}
	}
	r.known = append(r.known, KnownAnomaly{Name: name, Count: 1, Example: fmt.Sprintf(format, args...), Events: events})
}

// addKnown adds n occurrences of a known anomaly described elsewhere.
func (r *report) addKnown(k KnownAnomaly) {
	for i := range r.known {
		if r.known[i].Name == k.Name {
			r.known[i].Count += k.Count
			return
		}
	}
	r.known = append(r.known, k)
}

func (r *report) violate(events []int, format string, args ...any) {
	r.violateAt(0, events, format, args...)
}

// violateAt is violate for a violation that holds from time at (see
// Violation.At).
func (r *report) violateAt(at int64, events []int, format string, args ...any) {
	if len(r.violations) >= MaxViolations {
		r.omitted++
		return
	}
	r.violations = append(r.violations, Violation{Explanation: fmt.Sprintf(format, args...), Events: events, At: at})
}

func (r *report) cannotDecide(format string, args ...any) {
	r.unknown = append(r.unknown, fmt.Sprintf(format, args...))
}

func (r *report) detail(k string, v any) {
	if r.details == nil {
		r.details = map[string]any{}
	}
	r.details[k] = v
}

// result builds the Result; ok is the sentence for a valid verdict.
func (r *report) result(ok string) Result {
	res := Result{Checker: r.name, Details: r.details, Known: r.known}
	switch {
	case len(r.violations) > 0:
		res.Verdict = Invalid
		res.Violations = r.violations
		res.Omitted = r.omitted
		res.Explanation = r.violations[0].Explanation
		if n := len(r.violations) + r.omitted; n > 1 {
			res.Explanation = strings.TrimSuffix(res.Explanation, ".") + fmt.Sprintf(" (and %d more violations).", n-1)
		}
		seen := map[int]bool{}
		for _, v := range r.violations {
			for _, e := range v.Events {
				if !seen[e] {
					seen[e] = true
					res.Events = append(res.Events, e)
				}
			}
		}
		sort.Ints(res.Events)
	case len(r.unknown) > 0:
		res.Verdict = Unknown
		res.Explanation = r.unknown[0]
		if len(r.unknown) > 1 {
			res.Explanation = strings.TrimSuffix(res.Explanation, ".") + fmt.Sprintf(" (and %d more undecided).", len(r.unknown)-1)
			r.detail("undecided", r.unknown)
			res.Details = r.details
		}
	default:
		res.Verdict = Valid
		res.Explanation = ok
		if len(r.known) > 0 && !r.knownSaid {
			res.Explanation = strings.TrimSuffix(ok, ".") + "; known anomalies (documented Kafka behaviour, not violations): " + KnownSummary(r.known) + "."
		}
	}
	return res
}

// KnownSummary names known anomalies with their counts, e.g.
// "KAFKA-2334 ×3, duplicate-append ×1".
func KnownSummary(ks []KnownAnomaly) string {
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s ×%d", k.Name, k.Count)
	}
	return strings.Join(parts, ", ")
}

// isControl reports whether e is a control request that a broker accepted
// (the whole-request checks passed).
func acceptedControl(e *history.Event) bool {
	return e.Kind == history.KindControlRequest && e.Control.Verdict == history.VerdictAccepted &&
		e.Control.API != history.APIControlledShutdown
}

// ev formats an event reference for explanations.
func ev(e *history.Event) string { return fmt.Sprintf("event %d", e.Index) }

// nodeName formats a broker id.
func nodeName(id int32) string { return fmt.Sprintf("broker %d", id) }

// healInfo describes when the run's faults were healed.
type healInfo struct {
	healed  bool  // every started fault was stopped
	at      int64 // time the last fault stopped (or the first event if none)
	end     int64 // time of the last event
	openIdx int   // a fault_start never stopped (when !healed)
	// inForce says what was still in force at the end (when !healed):
	// a fault never stopped, or ZooKeeper out of the watcher's reach.
	inForce  string
	faults   int
	lastStop int // index of the last fault_stop, -1 if none
}

// heal finds when every fault was undone: the time of the last fault_stop
// (or of the event that ended a fault otherwise), provided every
// fault_start has an end. Faults pair as history.FaultWindows pairs them:
// by (source, ID), since nodes report their own failpoints as faults; a
// node's restart or clean stop ends the failpoints it had open (the process
// that was paused there is gone), and the end of the harness's heal phase
// ends every fault still open but a node's failpoint hold its process was
// still in when the history ended (holdsPastHeal). A fault ended by a second start of the same
// fault is not healed by it, so that end does not move the heal time. A
// kill recorded as failed that may have landed on a broker left down to
// the end (killedPastHeal) is in force too.
func heal(h *history.History) healInfo {
	hi := healInfo{healed: true, lastStop: -1, openIdx: -1}
	if len(h.Events) == 0 {
		return hi
	}
	hi.at = h.Events[0].Time
	hi.end = h.Events[len(h.Events)-1].Time
	windows, orphans := history.FaultWindowsOf(h, true, true)
	hi.faults = len(windows)
	starts := map[int]bool{} // a window ending at one was ended by its fault starting again
	for _, w := range windows {
		starts[w.Start.Index] = true
	}
	holding := holdsPastHeal(h, windows)
	for i, w := range windows {
		switch {
		case w.Open || holding[i]:
			hi.healed = false
			if hi.openIdx < 0 || w.Start.Index < hi.openIdx {
				hi.openIdx = w.Start.Index
			}
		case w.Stopped:
			hi.at = max(hi.at, w.End)
			hi.lastStop = max(hi.lastStop, w.EndIndex)
		case !starts[w.EndIndex]: // ended by its node's restart or the heal phase
			hi.at = max(hi.at, w.End)
		}
	}
	// A fault_stop with no start still says the nemesis healed something.
	for _, i := range orphans {
		if i >= 0 && i < len(h.Events) {
			hi.at = max(hi.at, h.Events[i].Time)
		}
		hi.lastStop = max(hi.lastStop, i)
	}
	if hi.openIdx >= 0 {
		hi.inForce = fmt.Sprintf("fault event %d was never stopped", hi.openIdx)
	}
	if k, why := killedPastHeal(h); k >= 0 && hi.healed {
		hi.healed = false
		hi.openIdx = k
		hi.inForce = why
	}
	if lost := zkLostPastHeal(h); lost >= 0 && hi.healed {
		hi.healed = false
		hi.openIdx = lost
		hi.inForce = fmt.Sprintf("the harness's ZooKeeper watcher lost its session at event %d, before the heal phase ended, and had none again to the end of the history: the ensemble served no session past the heal", lost)
	}
	return hi
}

// zkLostPastHeal returns the index of the harness watcher's last session
// loss when the watcher had no session from it, before the heal phase's
// end, to the end of the history, and -1 otherwise. An ensemble that serves
// no session holds every ZooKeeper request: a Kafka controller's event
// thread blocks in ZooKeeperClient.handleRequests and never handles a
// broker's restart, so partitions led by a restarted broker stay without a
// leader. That is a fault in force (seed 15 queue run: two ZooKeeper
// servers left stopped from +1m3.7s), not a cluster failing to recover.
func zkLostPastHeal(h *history.History) int {
	lost, healEnd := -1, -1
	for i := range h.Events {
		e := &h.Events[i]
		switch {
		case e.Kind == history.KindPhase && e.Phase != nil && e.Phase.Name == history.PhaseHeal && e.Phase.Mark == history.PhaseEnd:
			healEnd = i
		case e.Kind == history.KindZKWatch && e.Source == "zk" && e.Watch != nil && e.Watch.Type == "state":
			switch e.Watch.SessionState {
			case "StateHasSession":
				lost = -1
			case "StateDisconnected", "StateExpired":
				if lost < 0 {
					lost = i
				}
			}
		}
	}
	if lost < 0 || healEnd < 0 || lost > healEnd {
		return -1
	}
	return lost
}

// killedPastHeal returns the index of the fault_start of a kill or bounce
// whose request failed, on a broker the harness did not list running at
// the end of its heal phase, whose latest process was alive after that
// kill was sent and ended without a node_stop; -1 when there is none, with
// what it says. The engine may carry out a kill whose answer never came,
// and at any time after: f25's SIGKILL to n1, sent at +47s of a dense
// crash-lose-unflushed run (seed 42), was cut off by the end of the
// workload 13s later and recorded as failed, yet n1's process, started 3s
// before that, died with no node_stop (seed 43: n2's, started 1.5s after
// its kill failed), and no heal started a broker the nemesis did not know
// it had killed. The broker left down is a fault in force, not the cluster
// failing to recover, and the verdicts that need it healed are unknown.
func killedPastHeal(h *history.History) (int, string) {
	var running *history.RunningBrokers
	last := map[int32]int{}     // broker → index of its latest node event
	stopped := map[int32]bool{} // its latest process logged node_stop
	sent := map[string]int{}    // fault ID → index of its start, for kills
	type kill struct {
		start, stop int
		node        int32
	}
	var kills []kill
	for i := range h.Events {
		e := &h.Events[i]
		switch {
		case e.Kind == history.KindPhase && e.Phase != nil && e.Phase.Running != nil:
			running = e.Phase.Running
		case e.Kind == history.KindFaultStart && e.Source == "nemesis" && e.Fault != nil && killsProcess(e.Fault.Name) && len(e.Fault.Targets) == 1:
			sent[e.Fault.ID] = i
		case e.Kind == history.KindFaultStop && e.Source == "nemesis" && e.Fault != nil && e.Fault.Error != "":
			si, ok := sent[e.Fault.ID]
			if !ok {
				continue
			}
			if b, ok := brokerTarget(h.Events[si].Fault.Targets[0]); ok {
				kills = append(kills, kill{si, i, b})
			}
		case e.Node != 0 && e.Source == fmt.Sprintf("n%d", e.Node):
			last[e.Node] = i
			switch e.Kind {
			case history.KindNodeStart:
				stopped[e.Node] = false
			case history.KindNodeStop:
				stopped[e.Node] = true
			}
		}
	}
	if running == nil {
		return -1, ""
	}
	for _, k := range kills {
		if slices.Contains(running.IDs, k.node) || stopped[k.node] {
			continue
		}
		if l, ok := last[k.node]; !ok || l < k.start {
			continue // its process was gone before the kill was sent
		}
		se, ee := &h.Events[k.start], &h.Events[k.stop]
		why := ee.Fault.Error
		if i := strings.LastIndex(why, ": "); i >= 0 && len(why) > 80 {
			why = "…" + why[i+2:] // an engine error names the request's whole URL
		}
		return k.start, fmt.Sprintf("fault %s, a %s of broker %d sent at event %d, was recorded as failed at event %d (%s), yet broker %d's process, alive after it was sent, ended without a node_stop and was not running at the end: the kill may have landed after all, and nothing healed it",
			se.Fault.ID, se.Fault.Name, k.node, k.start, k.stop, why, k.node)
	}
	return -1, ""
}

// holdsPastHeal marks the windows the end of the heal phase closed that
// are a node's failpoint hold its process was still in when the history
// ended: no fault_stop of it came later and the process neither stopped nor
// started again. A node reports every failpoint it leaves (node/failpoint),
// so the heal did not end that hold; the nemesis had not known it was
// armed. A controller held in its broker change so to the end of a run (a
// queue run, seed 7: from +1m11s) never handles the brokers' restarts,
// as a Kafka controller whose event thread blocks never would, and its
// partitions stay without a leader: a fault in force, not the cluster
// failing to recover from healed ones.
func holdsPastHeal(h *history.History, windows []history.FaultWindow) map[int]bool {
	type key struct{ src, id string }
	after := map[key]int{} // a hold → the index of the heal end that closed it
	for i, w := range windows {
		if w.Open || w.Stopped || w.EndIndex < 0 || w.EndIndex >= len(h.Events) || w.Start.Fault == nil || w.Start.Fault.Failpoint == "" || w.Start.Node == 0 {
			continue
		}
		if e := &h.Events[w.EndIndex]; e.Kind != history.KindPhase {
			continue
		}
		after[key{w.Start.Source, w.Start.Fault.ID}] = i
	}
	if len(after) == 0 {
		return nil
	}
	holding := map[int]bool{}
	for k, i := range after {
		holding[i] = true
		for j := windows[i].EndIndex + 1; j < len(h.Events); j++ {
			e := &h.Events[j]
			if e.Source != k.src {
				continue
			}
			if e.Kind == history.KindNodeStart || e.Kind == history.KindNodeStop ||
				(e.Kind == history.KindFaultStop && e.Fault != nil && e.Fault.ID == k.id) {
				delete(holding, i)
				break
			}
		}
	}
	return holding
}

// sortedTPs returns the keys of m in partition order.
func sortedTPs[V any](m map[history.TopicPartition]V) []history.TopicPartition {
	return slices.SortedFunc(maps.Keys(m), history.TopicPartition.Compare)
}

// nodeTP names one replica: a partition on one broker.
type nodeTP struct {
	tp   history.TopicPartition
	node int32
}

// forgetProcess deletes m's entries for node's replicas: a new process of
// a node starts with none of its predecessor's in-memory state (its log
// stays on disk).
func forgetProcess[V any](m map[nodeTP]V, node int32) {
	maps.DeleteFunc(m, func(k nodeTP, _ V) bool { return k.node == node })
}
