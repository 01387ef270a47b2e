package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/rundir"
)

// EnvFigures are the measured costs of the environment and its faults. They
// go to BENCHMARKS.md; every figure is a list of samples plus its median, so
// the spread on a noisy machine is visible.
type EnvFigures struct {
	ImageBuilt     bool            `json:"image_built"`
	ImageBuildTime time.Duration   `json:"image_build_ns"`
	EnsembleUp     []time.Duration `json:"ensemble_up_ns"`
	BounceGap      []time.Duration `json:"bounce_gap_ns"`
	Election       []time.Duration `json:"election_after_partition_ns"`
}

// Median of samples (0 when empty).
func Median(s []time.Duration) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	return c[len(c)/2]
}

// MeasureEnv runs the environment benchmark: it builds the base image if it is
// missing (timing the cold build), starts and removes a 3-server ensemble reps
// times (warm start-up), then on one ensemble bounces a server and partitions
// the ZooKeeper leader from its followers reps times each. Every fault goes
// to RUN_DIR/history/nemesis.jsonl; figures go to RUN_DIR/figures.json.
func MeasureEnv(ctx context.Context, runDir string, reps int, out io.Writer) (EnvFigures, error) {
	var f EnvFigures
	// The servers' data directories are bind mounts: Docker takes a relative
	// path for a volume name and refuses it, so the default runs/... must be
	// made absolute here.
	abs, err := filepath.Abs(runDir)
	if err != nil {
		return f, fmt.Errorf("bench-env: run directory %q: %w", runDir, err)
	}
	runDir = abs
	eng, err := docker.Connect(ctx)
	if err != nil {
		return f, err
	}
	defer eng.Close()
	if err := EnsureDir(filepath.Join(runDir, rundir.HistoryDir)); err != nil {
		return f, err
	}
	hw, err := history.Create(filepath.Join(runDir, rundir.HistoryDir, "nemesis.jsonl"), "nemesis", 0)
	if err != nil {
		return f, err
	}
	defer hw.Close()
	rec := nemesis.NewRecorder(hw)

	rep, err := eng.EnsureImage(ctx, docker.DefaultBaseImage(), out)
	if err != nil {
		return f, err
	}
	f.ImageBuilt, f.ImageBuildTime = rep.Built, rep.Duration

	zk := cluster.ZKOptions{Servers: 3, TickTime: 100 * time.Millisecond, SyncLimit: 5}
	var keep *cluster.Cluster
	defer func() {
		if keep != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			keep.Close(cctx)
		}
	}()
	for i := 0; i < reps; i++ {
		start := time.Now()
		c, err := cluster.Start(ctx, eng, cluster.Options{RunDir: filepath.Join(runDir, fmt.Sprintf("up%d", i)), ZK: zk})
		if err != nil {
			return f, err
		}
		f.EnsembleUp = append(f.EnsembleUp, time.Since(start))
		fmt.Fprintf(out, "ensemble up #%d: %s\n", i+1, f.EnsembleUp[i].Round(time.Millisecond))
		if i == reps-1 {
			keep = c
			break
		}
		if err := c.Close(ctx); err != nil {
			return f, err
		}
	}

	for i := 0; i < reps; i++ {
		s := keep.ZKServer(1 + i%3)
		id := rec.Start("bounce", []string{fmt.Sprintf("zk%d", s.ID)}, "")
		gap, err := nemesis.Bounce(ctx, s.Container)
		rec.Stop(id, "bounce", []string{fmt.Sprintf("zk%d", s.ID)}, err)
		if err != nil {
			return f, err
		}
		f.BounceGap = append(f.BounceGap, gap)
		fmt.Fprintf(out, "bounce zk%d: gap %s\n", s.ID, gap.Round(time.Millisecond))
		if _, err := keep.WaitZKReady(ctx, time.Minute); err != nil {
			return f, err
		}
	}

	net := nemesis.NewNet()
	defer net.HealAll(context.WithoutCancel(ctx))
	for i := 0; i < reps; i++ {
		leader, err := keep.ZKLeaderAmong(ctx)
		if err != nil {
			return f, err
		}
		var rest []int
		var restC []*docker.Container
		for _, s := range keep.ZKServers() {
			if s.ID != leader {
				rest = append(rest, s.ID)
				restC = append(restC, s.Container)
			}
		}
		targets := []string{fmt.Sprintf("zk%d", leader)}
		id := rec.Start("partition-isolate", targets, "ZooKeeper leader cut off from both followers")
		start := time.Now()
		if err := net.Partition(ctx, []*docker.Container{keep.ZKServer(leader).Container}, restC); err != nil {
			return f, err
		}
		var took time.Duration
		for {
			if _, err := keep.ZKLeaderAmong(ctx, rest...); err == nil {
				took = time.Since(start)
				break
			}
			if time.Since(start) > time.Minute {
				return f, fmt.Errorf("no new zookeeper leader a minute after isolating zk%d", leader)
			}
			time.Sleep(20 * time.Millisecond)
		}
		f.Election = append(f.Election, took)
		fmt.Fprintf(out, "isolate leader zk%d: majority elected a new leader in %s\n", leader, took.Round(time.Millisecond))
		err = net.HealAll(ctx)
		rec.Stop(id, "partition-isolate", targets, err)
		if err != nil {
			return f, err
		}
		if _, err := keep.WaitZKReady(ctx, time.Minute); err != nil {
			return f, err
		}
	}
	hw.Sync()
	b, _ := json.MarshalIndent(f, "", "  ")
	if err := os.WriteFile(filepath.Join(runDir, "figures.json"), b, 0o644); err != nil {
		return f, fmt.Errorf("write figures: %w", err)
	}
	return f, nil
}
