package historytest

import "pgregory.net/rapid"

// Draw draws a GenConfig for a property test: Partitions, Processes and
// Ops from 1 up to max's, UnknownRate and ReadRate from 0 up to max's,
// FinalReads, NoCompletion and the seed at random, and NodeEvents at random
// only when max.NodeEvents is set.
func Draw(rt *rapid.T, max GenConfig) GenConfig {
	cfg := GenConfig{
		Partitions:  rapid.IntRange(1, max.Partitions).Draw(rt, "partitions"),
		Processes:   rapid.IntRange(1, max.Processes).Draw(rt, "processes"),
		Ops:         rapid.IntRange(1, max.Ops).Draw(rt, "ops"),
		UnknownRate: rapid.Float64Range(0, max.UnknownRate).Draw(rt, "unknown"),
		ReadRate:    rapid.Float64Range(0, max.ReadRate).Draw(rt, "reads"),
		FinalReads:  rapid.Bool().Draw(rt, "final"),
	}
	if max.NodeEvents {
		cfg.NodeEvents = rapid.Bool().Draw(rt, "nodes")
	}
	cfg.NoCompletion = rapid.Bool().Draw(rt, "nocompletion")
	cfg.Seed = rapid.Int64().Draw(rt, "seed")
	return cfg
}
