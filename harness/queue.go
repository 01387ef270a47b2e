package harness

import (
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/workloads"
)

// newClientWorkload is the run's client workload (--workload): the log
// workload from lc, or the queue workload with lc's brokers and topic.
func newClientWorkload(cfg RunConfig, lc workloads.LogConfig, open func(string) (*history.Writer, error)) (workloads.Workload, error) {
	if cfg.Workload == rundir.WorkloadQueue {
		return workloads.NewQueue(queueConfig(cfg, lc), open)
	}
	return workloads.NewLog(lc, open)
}

// queueConfig is the queue workload of cfg: its producers send, its
// readers consume (half of them in a consumer group).
func queueConfig(cfg RunConfig, lc workloads.LogConfig) workloads.QueueConfig {
	return workloads.QueueConfig{
		Brokers: lc.Brokers, Topic: lc.Topic, Partitions: lc.Partitions,
		Producers: cfg.Producers, Consumers: cfg.Readers, Transactional: cfg.QueueTxn,
		OpTimeout: lc.OpTimeout, Seed: cfg.Seed,
	}
}
