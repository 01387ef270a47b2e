package checkers

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/linearize"
)

// Linearizable checks each partition's produce/read history against the
// log model with porcupine (see package linearize). Porcupine's Unknown (its
// timeout ran out) is reported as unknown, never as valid. Fencing
// violations found by the fencing checkers are drawn into the
// visualization next to the nemesis windows.
//
// An empty read below acknowledged produces is not judged by the model
// (Kafka allows it, see the package doc); each is classified here with the
// node event log (classifyStale): answered by a new leader, it is the known
// anomaly KAFKA-2334; by a deposed leader not told of its successor before
// the fetch was sent, deposed-leader-read (both invalid only with
// StrictReads); otherwise a violation.
//
// A partition whose unclean election cost acknowledged records (election.go)
// has, by that election's design, no single log: its records were read from
// the old leader and then replaced. Its failure to linearize is said in the
// valid sentence, not a violation: the isr checker reports the known
// anomaly unclean-election, invalid with StrictElections.
type Linearizable struct {
	Timeout       time.Duration
	VisualizePath string
	StrictReads   bool
}

// Name implements Checker.
func (Linearizable) Name() string { return "linearizable" }

// Check implements Checker.
func (c Linearizable) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	opts := linearize.Options{Timeout: c.Timeout, VisualizePath: c.VisualizePath, Ops: operations(h)}
	if c.VisualizePath != "" {
		for _, fc := range []Checker{ControllerFencing{}, BrokerFencing{}, LeaderUniqueness{}} {
			for _, v := range fc.Check(h).Violations {
				last := v.Events[len(v.Events)-1]
				opts.Marks = append(opts.Marks, linearize.Mark{Tag: fc.Name(), Description: "violation",
					Start: h.Events[last].Time})
			}
		}
	}
	out := linearize.Check(h, opts)
	var t0 int64
	if len(h.Events) > 0 {
		t0 = h.Events[0].Time
	}
	var facts *nodeFacts
	// costly: the first unclean election of each partition that cost
	// acknowledged records (see election.go), found only when some
	// partition is not linearizable.
	costly := map[string]uncleanCost{}
	quorum := newQuorumLosses(h)
	for _, p := range out.Partitions {
		if p.Result == porcupine.Illegal {
			for _, c := range uncleanCosts(h, opts.Ops) {
				tp := c.state().TP().String()
				if _, seen := costly[tp]; !seen && len(c.lost) > 0 {
					costly[tp] = c
				}
			}
			break
		}
	}
	var unclean []string
	stale := map[string]int{}
	ops, dups := 0, 0
	var examples []linearize.Duplicate
	for _, p := range out.Partitions {
		ops += p.Ops
		dups += p.Duplicates
		for _, d := range p.DuplicateExamples {
			if len(examples) < maxDuplicateExamples {
				examples = append(examples, d)
			}
		}
		if len(p.StaleEmpty) > 0 && facts == nil {
			facts = newNodeFacts(h)
		}
		c.judgeStale(r, h, facts, p, t0, stale)
		switch p.Result {
		case porcupine.Illegal:
			if in := quorum.any(p.Partition); in != nil {
				// Records read from the lost suffix and then replaced by
				// the new leader's: no single log can fit.
				who, evs := describeQuorumLoss(in, t0)
				text := fmt.Sprintf("partition %s is not linearizable after crash-lose-unflushed: %s (%s)", p.Partition, in.how(), who)
				r.knownAnomaly(in.name(), evs, "%s.", text)
				unclean = append(unclean, text+" (known anomaly "+in.name()+")")
				continue
			}
			if c, ok := costly[p.Partition]; ok {
				// Records read from the old leader's log and then
				// replaced by the new leader's: no single log can fit,
				// by the unclean election's design.
				unclean = append(unclean, fmt.Sprintf("partition %s is not linearizable after controller %d's unclean election of broker %d (event %d), which cost %d acknowledged %s (known anomaly %s, reported by the isr checker)",
					p.Partition, c.write.Node, c.state().Leader, c.write.Index, len(c.lost), plural(len(c.lost), "record", "records"), KnownUncleanElection))
				continue
			}
			if len(p.Suspects) > 0 {
				r.violate(p.Suspects, "partition %s is not linearizable: read event %d returned a value that no produce wrote there before the read returned.", p.Partition, p.Suspects[0])
			} else if len(p.Stuck) > 0 {
				r.violate(p.Stuck, "partition %s is not linearizable: no order of its %d produces and reads fits one log; the first operation that cannot be placed is the one invoked at event %d.", p.Partition, p.Ops, p.Stuck[0])
			} else {
				r.violate(nil, "partition %s is not linearizable: no order of its %d produces and reads fits one log (see the visualization).", p.Partition, p.Ops)
			}
		case porcupine.Unknown:
			r.cannotDecide("porcupine ran out of its %s budget on partition %s (%d operations) before deciding.", c.Timeout, p.Partition, p.Ops)
		}
	}
	r.detail("partitions", out.Partitions)
	r.detail("elapsed_ms", out.Elapsed.Milliseconds())
	// Duplicates are reported whatever the verdict, but never make it
	// invalid: a non-idempotent producer's resends are at-least-once
	// delivery, not a fencing or durability failure.
	r.detail("duplicates", dups)
	if len(examples) > 0 {
		r.detail("duplicate_examples", examples)
	}
	if out.Visualization != "" {
		r.detail("visualization", out.Visualization)
	}
	if out.Note != "" {
		r.detail("note", out.Note)
	}
	ok := fmt.Sprintf("all %d partitions (%d operations) are linearizable as a log", len(out.Partitions), ops)
	if len(unclean) > 0 {
		ok = fmt.Sprintf("%d of %d partitions (%d operations) are linearizable as a log; %s", len(out.Partitions)-len(unclean), len(out.Partitions), ops, strings.Join(unclean, "; "))
	}
	if dups > 0 {
		ok += fmt.Sprintf("; %d duplicate %s from client resends (values %s)",
			dups, plural(dups, "append", "appends"), duplicateList(examples, dups))
		d := examples[0]
		who := "a non-idempotent producer's resend"
		if len(d.Events) > 0 && d.Events[0] < len(h.Events) && h.Events[d.Events[0]].Op != nil && h.Events[d.Events[0]].Op.Idempotent {
			// Not at-least-once delivery: the idempotence checker
			// reports it as a violation.
			who = "an idempotent producer's record appended twice (see the idempotence checker)"
		}
		r.addKnown(KnownAnomaly{Name: KnownDuplicateAppend, Count: dups, Events: d.Events,
			Example: fmt.Sprintf("%q was appended at offsets %v of %s (acknowledged at %d): %s.", d.Value, d.Offsets, d.Partition, d.Acknowledged, who)})
	}
	for _, kind := range []struct{ name, who string }{
		{KnownKafka2334, "from a new leader whose HW lagged, the known anomaly KAFKA-2334"},
		{KnownDeposedLeaderRead, "from a deposed leader not yet told of its successor, the known anomaly " + KnownDeposedLeaderRead},
	} {
		n := stale[kind.name]
		if n == 0 {
			continue
		}
		first := ""
		for _, k := range r.known {
			if k.Name == kind.name {
				first = strings.TrimSuffix(k.Example, ".")
			}
		}
		ok += fmt.Sprintf("; %d stale empty %s %s (the first: %s)", n, plural(n, "read", "reads"), kind.who, first)
	}
	r.knownSaid = true
	return r.result(ok + ".")
}

// judgeStale classifies partition p's stale empty reads (classifyStale):
// a violation, a known anomaly (and, with StrictReads, a violation too),
// counted per kind in stale. The reads beyond the examples the partition
// kept count under the kind its first example got, the one shown.
func (c Linearizable) judgeStale(r *report, h *history.History, facts *nodeFacts, p linearize.PartitionOutcome, t0 int64, stale map[string]int) {
	firstKind := ""
	for _, s := range p.StaleEmpty {
		v := classifyStale(h, facts, s, t0)
		if firstKind == "" {
			firstKind = v.known
		}
		switch {
		case v.known == "":
			r.violate(v.events, "%s", v.explanation)
		case c.StrictReads:
			r.knownAnomaly(v.known, v.events, "%s", v.explanation)
			r.violate(v.events, "known anomaly %s (strict reads): %s", v.known, v.explanation)
		default:
			r.knownAnomaly(v.known, v.events, "%s", v.explanation)
			stale[v.known]++
		}
	}
	if extra := p.StaleEmptyCount - len(p.StaleEmpty); extra > 0 && firstKind != "" {
		for i := range r.known {
			if r.known[i].Name == firstKind {
				r.known[i].Count += extra
			}
		}
	}
}

// maxDuplicateExamples caps the duplicate appends described in the details.
const maxDuplicateExamples = 10

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// duplicateList names the first examples' values with their offsets, e.g.
// `"p1-4" at offsets 4 and 5 of chaos-0`, and how many more there are, so
// the valid verdict itself says where to look.
func duplicateList(examples []linearize.Duplicate, total int) string {
	parts := make([]string, 0, len(examples))
	shown := 0
	for _, d := range examples {
		offs := make([]string, len(d.Offsets))
		for i, o := range d.Offsets {
			offs[i] = strconv.FormatInt(o, 10)
		}
		list := strings.Join(offs, ", ")
		if n := len(offs); n > 1 {
			list = strings.Join(offs[:n-1], ", ") + " and " + offs[n-1]
		}
		parts = append(parts, fmt.Sprintf("%q at offsets %s of %s", d.Value, list, d.Partition))
		shown += len(d.Offsets) - 1
		if len(parts) == 3 {
			break
		}
	}
	s := strings.Join(parts, "; ")
	if total > shown {
		s += fmt.Sprintf("; %d more", total-shown)
	}
	return s
}
