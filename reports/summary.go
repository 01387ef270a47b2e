package reports

// This file owns how one history event reads in a report: a short line with
// the payload fields a person needs to follow a violation, and relative
// time formatting. It is shared by the HTML report and JUnit messages.

import (
	"fmt"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// relTime formats t as seconds since the run's start (t0), millisecond
// precision: violations are read against the timeline, whose axis uses the
// same origin.
func relTime(t, t0 int64) string {
	d := time.Duration(t - t0)
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return fmt.Sprintf("%s%d.%03ds", sign, d/time.Second, (d%time.Second)/time.Millisecond)
}

// maxListed bounds lists inside one summary line (records, partitions,
// checkpoint entries) so a huge payload cannot blow up a report row.
const maxListed = 4

// Summarize returns one readable line for e: the kind's key payload fields.
func Summarize(e *history.Event) string {
	switch {
	case e.Op != nil:
		return summarizeOp(e.Op)
	case e.Process != nil:
		s := fmt.Sprintf("incarnation %d", e.Process.Incarnation)
		if len(e.Process.Bugs) > 0 {
			s += " bugs " + strings.Join(e.Process.Bugs, ",")
		}
		s += optional(" policy ", e.Process.Policy, "")
		s += optional(" (", e.Process.Reason, ")")
		return s
	case e.Registration != nil:
		return fmt.Sprintf("broker %d registered, broker epoch (czxid) %d", e.Registration.BrokerID, e.Registration.BrokerEpoch)
	case e.Controller != nil:
		c := e.Controller
		s := fmt.Sprintf("controller epoch %d (zkVersion %d)", c.Epoch, c.EpochZkVersion)
		if c.Zxid != 0 {
			s += fmt.Sprintf(" zxid %d", c.Zxid)
		}
		s += optional(": ", c.Reason, "")
		return s
	case e.ZKWrite != nil:
		w := e.ZKWrite
		s := fmt.Sprintf("%s %s → %s; controller epoch %d", w.Op, w.Path, w.Outcome, w.ControllerEpoch)
		if w.Conditional {
			s += fmt.Sprintf(" (conditional on zkVersion %d)", w.EpochZkVersion)
		} else {
			s += " (unconditional)"
		}
		if w.Zxid != 0 {
			s += fmt.Sprintf(" zxid %d", w.Zxid)
		}
		if w.State != nil {
			s += "; " + stateString(w.State)
		}
		s += optional("; error: ", w.Error, "")
		return s
	case e.Control != nil:
		return summarizeControl(e.Kind, e.Control)
	case e.Shutdown != nil:
		s := e.Shutdown
		return fmt.Sprintf("ControlledShutdown of broker %d (broker epoch %d, cached %d) at controller epoch %d → %s%s",
			s.BrokerID, s.BrokerEpoch, s.CachedBrokerEpoch, s.ControllerEpoch, s.Verdict, errCode(s.ErrorCode))
	case e.Role != nil:
		r := e.Role
		s := fmt.Sprintf("%s: %s, leader %d leader epoch %d", r.TP(), r.Role, r.Leader, r.LeaderEpoch)
		if len(r.ISR) > 0 {
			s += fmt.Sprintf(" isr %v", r.ISR)
		}
		if r.ControllerEpoch != 0 {
			s += fmt.Sprintf(" (controller epoch %d)", r.ControllerEpoch)
		}
		return s
	case e.Append != nil:
		a := e.Append
		s := fmt.Sprintf("%s: offsets %d..%d at leader epoch %d, acks %d", a.TP(), a.BaseOffset, a.LastOffset, a.LeaderEpoch, a.Acks)
		if len(a.Values) > 0 {
			s += " values " + listOf(a.Values)
		}
		return s
	case e.HW != nil:
		return fmt.Sprintf("%s: high watermark %d → %d (leader epoch %d)", e.HW.TP(), e.HW.Old, e.HW.New, e.HW.LeaderEpoch)
	case e.ISR != nil:
		c := e.ISR
		s := fmt.Sprintf("%s: ISR %s %v → %v at leader epoch %d", c.TP(), c.Action, c.Old, c.New, c.LeaderEpoch)
		s += optional(" → ", c.Outcome, "")
		return s
	case e.Checkpoint != nil:
		var parts []string
		for i, en := range e.Checkpoint.Entries {
			if i == maxListed {
				parts = append(parts, fmt.Sprintf("… %d more", len(e.Checkpoint.Entries)-maxListed))
				break
			}
			parts = append(parts, fmt.Sprintf("%s-%d:%d", en.Topic, en.Partition, en.HW))
		}
		s := "checkpoint " + strings.Join(parts, " ")
		if len(e.Checkpoint.Entries) == 0 {
			s = "checkpoint (empty)"
		}
		if e.Checkpoint.Hosted != nil {
			s += fmt.Sprintf("; hosts %d partitions", len(e.Checkpoint.Hosted))
		}
		return s
	case e.Truncation != nil:
		t := e.Truncation
		s := fmt.Sprintf("%s: truncated %d → %d", t.TP(), t.From, t.To)
		s += optional(" (", t.Reason, ")")
		return s
	case e.Watch != nil:
		return summarizeWatch(e.Watch)
	case e.Deletion != nil:
		d := e.Deletion
		s := fmt.Sprintf("deletion of topic %s %s, partitions %v", d.Topic, d.Step, d.Partitions)
		if d.Step == history.PartitionDeleted {
			s += fmt.Sprintf(" (replica at leader epoch %d)", d.LeaderEpoch)
		} else {
			s += fmt.Sprintf("; controller epoch %d", d.ControllerEpoch)
		}
		s += optional(": ", d.Reason, "")
		return s
	case e.Fault != nil:
		f := e.Fault
		s := f.Name
		s += optional(" ", f.Failpoint, "")
		if len(f.Targets) > 0 {
			s += " on " + strings.Join(f.Targets, ",")
		}
		s += " [" + f.ID + "]"
		s += optional(": ", f.Detail, "")
		s += optional("; error: ", f.Error, "")
		return s
	case e.Phase != nil:
		return fmt.Sprintf("phase %s %s", e.Phase.Name, e.Phase.Mark)
	}
	return ""
}

func summarizeOp(o *history.ClientOp) string {
	var b strings.Builder
	fmt.Fprintf(&b, "process %d %s %s %s", o.Process, o.Type, o.F, opTarget(o))
	if o.Final {
		b.WriteString(" (final)")
	}
	switch o.F {
	case history.FProduce:
		if o.Value != "" {
			fmt.Fprintf(&b, " value %q", o.Value)
		}
		if o.Type == history.OpOK {
			fmt.Fprintf(&b, " → offset %d", o.Offset)
		}
		if o.Acks != 0 && o.Type == history.OpInvoke {
			fmt.Fprintf(&b, " acks %d", o.Acks)
		}
	case history.FCreateTopic, history.FDeleteTopic, history.FReassign, history.FPreferredElection, history.FControlledShutdown:
		if o.Value != "" {
			fmt.Fprintf(&b, ": %s", o.Value)
		}
	case history.FRead:
		fmt.Fprintf(&b, " from offset %d", o.Offset)
		if o.Type == history.OpOK {
			fmt.Fprintf(&b, " → %d records", len(o.Records))
			if len(o.Records) > 0 {
				var rs []string
				for i, r := range o.Records {
					if i == maxListed {
						rs = append(rs, fmt.Sprintf("… %d more", len(o.Records)-maxListed))
						break
					}
					rs = append(rs, fmt.Sprintf("%d:%q", r.Offset, r.Value))
				}
				b.WriteString(" [" + strings.Join(rs, " ") + "]")
			}
		}
	}
	if o.Error != "" {
		fmt.Fprintf(&b, "; error: %s", o.Error)
	}
	b.WriteString(errCode(o.ErrorCode))
	return b.String()
}

func summarizeControl(k history.Kind, c *history.Control) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s #%d from controller %d epoch %d", c.API, c.CorrelationID, c.ControllerID, c.ControllerEpoch)
	if c.BrokerEpoch >= 0 {
		fmt.Fprintf(&b, ", broker epoch %d", c.BrokerEpoch)
	} else {
		b.WriteString(", no broker epoch")
	}
	if k == history.KindControlSent {
		fmt.Fprintf(&b, " → to broker %d", c.TargetBroker)
	} else {
		fmt.Fprintf(&b, " → %s%s (broker knew controller epoch %d, own broker epoch %d)",
			c.Verdict, errCode(c.ErrorCode), c.KnownControllerEpoch, c.OwnBrokerEpoch)
	}
	if c.DeletePartition {
		b.WriteString(" delete")
	}
	for i, p := range c.Partitions {
		if i == maxListed {
			fmt.Fprintf(&b, "; … %d more partitions", len(c.Partitions)-maxListed)
			break
		}
		fmt.Fprintf(&b, "; %s-%d leader %d epoch %d", p.Topic, p.Partition, p.Leader, p.LeaderEpoch)
		if len(p.ISR) > 0 {
			fmt.Fprintf(&b, " isr %v", p.ISR)
		}
		b.WriteString(errCode(p.ErrorCode))
	}
	return b.String()
}

func summarizeWatch(w *history.Watch) string {
	s := w.Type + " " + w.Path
	switch {
	case w.State != nil:
		s += ": " + stateString(w.State)
	case w.ControllerID != nil:
		s += fmt.Sprintf(": controller %d", *w.ControllerID)
	case w.ControllerEpoch != nil:
		s += fmt.Sprintf(": controller epoch %d", *w.ControllerEpoch)
	case w.Brokers != nil:
		var ids []string
		for _, br := range w.Brokers {
			ids = append(ids, fmt.Sprintf("%d(czxid %d)", br.ID, br.Czxid))
		}
		s += ": " + strings.Join(ids, " ")
	case w.SessionState != "":
		s += ": session " + w.SessionState
	}
	if w.Mzxid != 0 {
		s += fmt.Sprintf(" mzxid %d", w.Mzxid)
	}
	return s
}

func stateString(s *history.PartitionState) string {
	return fmt.Sprintf("%s leader %d leader epoch %d isr %v controller epoch %d", s.TP(), s.Leader, s.LeaderEpoch, s.ISR, s.ControllerEpoch)
}

func errCode(c int16) string {
	switch c {
	case 0:
		return ""
	case history.ErrStaleControllerEpoch:
		return " (STALE_CONTROLLER_EPOCH)"
	case history.ErrFencedLeaderEpoch:
		return " (FENCED_LEADER_EPOCH)"
	case history.ErrStaleBrokerEpoch:
		return " (STALE_BROKER_EPOCH)"
	case history.ErrNotEnoughReplicas, history.ErrNotEnoughReplicasAftr:
		return fmt.Sprintf(" (NOT_ENOUGH_REPLICAS %d)", c)
	}
	return fmt.Sprintf(" (error %d)", c)
}

func listOf(vs []string) string {
	if len(vs) > maxListed {
		return fmt.Sprintf("%q … %d more", vs[:maxListed], len(vs)-maxListed)
	}
	return fmt.Sprintf("%q", vs)
}

// optional is prefix, v and suffix, or nothing when v is empty: a summary
// names an optional field only where the event carries it.
func optional(prefix, v, suffix string) string {
	if v == "" {
		return ""
	}
	return prefix + v + suffix
}
