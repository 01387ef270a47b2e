package reports

// Control-plane operations (workloads/admin.go) in the report: they name a
// broker or a whole topic rather than one partition, and an operator's
// action that disturbs the cluster belongs on the fault lane beside the
// nemesis's faults.

import (
	"fmt"

	"github.com/zkchaos/zkchaos/history"
)

// adminColor marks operator actions on the fault lane; a hue the page uses
// for nothing else (see nodeColors).
const adminColor = "#6b8e23"

func isAdminOp(f string) bool {
	switch f {
	case history.FCreateTopic, history.FDeleteTopic, history.FReassign, history.FPreferredElection, history.FControlledShutdown:
		return true
	}
	return false
}

// opTarget names what an operation acts on: a broker for a controlled
// shutdown, a topic for a topic creation, otherwise its partition.
func opTarget(o *history.ClientOp) string {
	switch o.F {
	case history.FControlledShutdown:
		return fmt.Sprintf("broker %d", o.Broker)
	case history.FCreateTopic, history.FDeleteTopic:
		return "topic " + o.Topic
	}
	return fmt.Sprintf("%s-%d", o.Topic, o.Partition)
}

// adminSpan is an admin operation's interval on the fault lane, from its
// invoke at start to its completion done.
func adminSpan(start int64, done *history.Event) span {
	o := done.Op
	label := o.F + " "
	if o.F == history.FControlledShutdown {
		label += fmt.Sprintf("n%d", o.Broker)
	} else {
		label += opTarget(o)
	}
	if o.Type != history.OpOK {
		label += " (" + string(o.Type) + ")"
	}
	return span{from: start, to: done.Time, label: label, color: adminColor,
		title: fmt.Sprintf("%s, by %s", Summarize(done), done.Source)}
}
