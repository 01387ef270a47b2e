package checkers

import (
	"fmt"
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
type Linearizable struct {
	Timeout       time.Duration
	VisualizePath string
}

// Name implements Checker.
func (Linearizable) Name() string { return "linearizable" }

// Check implements Checker.
func (c Linearizable) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	opts := linearize.Options{Timeout: c.Timeout, VisualizePath: c.VisualizePath}
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
	ops := 0
	for _, p := range out.Partitions {
		ops += p.Ops
		switch p.Result {
		case porcupine.Illegal:
			if len(p.Suspects) > 0 {
				r.violate(p.Suspects, "partition %s is not linearizable: read event %d returned a value that no produce wrote there, or nothing where an acknowledged produce had written.", p.Partition, p.Suspects[0])
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
	if out.Visualization != "" {
		r.detail("visualization", out.Visualization)
	}
	if out.Note != "" {
		r.detail("note", out.Note)
	}
	return r.result(fmt.Sprintf("all %d partitions (%d operations) are linearizable as a log.", len(out.Partitions), ops))
}
