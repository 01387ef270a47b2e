package historytest

// Bench1M is the configuration of the generated 1M-event history that the
// checkers' and the reader's benchmarks and `chaos check` measurements use
// (8 partitions × 31,500 operations plus node, watcher and nemesis events:
// 1,015,674 events).
var Bench1M = GenConfig{Partitions: 8, Processes: 10, Ops: 31_500, UnknownRate: 0.05,
	ReadRate: 0.3, FinalReads: true, NodeEvents: true, Seed: 1}

// Bench1MPolls is Bench1M with reads shaped like a real run's: one poll of
// up to 64 records, half tailing the log and half from a random offset
// (ReadRecords). A stored 60 s run (6 clients, 3 partitions) read 33.6
// records per read on average (median 43); Bench1M's reads return 1 to 3.
var Bench1MPolls = func() GenConfig { c := Bench1M; c.ReadRecords = 64; return c }()
