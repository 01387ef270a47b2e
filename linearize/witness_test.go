package linearize

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// Property: witness finds a linearization exactly when porcupine does, on
// generated partitions (clean, with unknown outcomes and final reads) that
// are then disturbed: operation intervals moved or shrunk (which breaks
// the real-time order), a read's record replaced by another offset's value,
// a produce moved to another offset. Check trusts witness's true and runs
// porcupine on its false, so a witness that said true on an Illegal
// partition would turn a violation into Ok; this is what catches it.
func TestWitnessAgreesWithPorcupine(t *testing.T) {
	var legal, illegal int
	rapid.Check(t, func(rt *rapid.T) {
		cfg := hb.Draw(rt, hb.GenConfig{Partitions: 1, Processes: 6, Ops: 60, UnknownRate: 0.5, ReadRate: 0.7})
		parts, _ := build(hb.Clean(cfg))
		if len(parts) == 0 {
			return
		}
		ops := parts[0].ops
		for range rapid.IntRange(0, 3).Draw(rt, "mutations") {
			if len(ops) == 0 {
				break
			}
			i := rapid.IntRange(0, len(ops)-1).Draw(rt, "op")
			op := &ops[i]
			switch rapid.IntRange(0, 3).Draw(rt, "kind") {
			case 0: // move the interval
				d := rapid.Int64Range(-30, 30).Draw(rt, "shift") * hb.Ms
				op.Call += d
				if op.Return != 1<<63-1 {
					op.Return += d
				}
			case 1: // shrink it to a point
				if op.Return != 1<<63-1 {
					op.Call = op.Return - rapid.Int64Range(0, 2).Draw(rt, "width")*hb.Ms
				}
			case 2: // a read returns another offset's value
				out := op.Output.(*output)
				in := op.Input.(*input)
				if len(out.records) == 0 || in.t.n < 2 {
					continue
				}
				recs := append([]history.Record(nil), out.records...)
				j := rapid.IntRange(0, len(recs)-1).Draw(rt, "rec")
				off := rapid.Int64Range(0, int64(in.t.n)-1).Draw(rt, "from")
				recs[j].Value, _ = in.t.value(off)
				op.Output = &output{records: recs}
			case 3: // a produce at another offset
				out := *op.Output.(*output) // a copy: the build's own is shared
				if op.Input.(*input).kind != produceOp {
					continue
				}
				out.offset += rapid.Int64Range(-2, 2).Draw(rt, "delta")
				op.Output = &out
			}
		}
		want := porcupine.CheckOperationsTimeout(logModel, ops, 10*time.Second)
		if want == porcupine.Unknown {
			rt.Skip("porcupine timed out")
		}
		if got := witness(ops); got != (want == porcupine.Ok) {
			rt.Fatalf("witness %v, porcupine %s on %d ops", got, want, len(ops))
		}
		if want == porcupine.Ok {
			legal++
		} else {
			illegal++
		}
	})
	t.Logf("%d legal, %d illegal partitions compared", legal, illegal)
	if legal == 0 || illegal == 0 {
		t.Errorf("the property met %d legal and %d illegal partitions; it needs both", legal, illegal)
	}
}
