package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/rundir"
)

func newFaultCmd() *cobra.Command {
	var (
		dir     string
		runsDir string
		pick    int
	)
	cmd := &cobra.Command{
		Use:   "fault KIND|heal",
		Short: "Inject a fault into the cluster of a running `chaos up`, or heal every fault",
		Long: `fault reaches the 'chaos up' process that runs on a run directory (through
RUN_DIR/` + rundir.ControlFile + `, a listener on 127.0.0.1) and asks it to inject one
fault of the catalogue, targets chosen by role at that moment (the controller
now, the ZooKeeper leader now), or with 'heal' to heal every fault. The fault
is recorded in the run's history like a scheduled one. Without --dir it uses
the one run under --runs that has a running 'chaos up'.

Kinds: ` + kindList(),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind := args[0]
			if kind != "heal" {
				if _, ok := faults.Lookup(faults.FaultKind(kind)); !ok {
					return withCode(exitBad, fmt.Errorf("unknown fault %q; the catalogue: %s", kind, kindList()))
				}
			}
			if pick < 0 {
				return withCode(exitBad, fmt.Errorf("--pick %d: want 0 or more", pick))
			}
			if dir == "" {
				d, err := liveRunDir(runsDir)
				if err != nil {
					return withCode(exitBad, err)
				}
				dir = d
			}
			msg, err := harness.SendFault(cmd.Context(), dir, kind, pick)
			if err != nil {
				return withCode(exitBad, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "run directory of the running 'chaos up' (default: the only one under --runs)")
	f.StringVar(&runsDir, "runs", "runs", "where to look for a running 'chaos up' without --dir")
	f.IntVar(&pick, "pick", 0, "choose among candidate targets (e.g. which broker), as a schedule step's pick")
	return cmd
}

// liveRunDir finds the one run directory under runs with a control file.
func liveRunDir(runs string) (string, error) {
	found, err := filepath.Glob(filepath.Join(runs, "*", rundir.ControlFile))
	if err != nil {
		return "", fmt.Errorf("--runs %s: %w", runs, err)
	}
	switch len(found) {
	case 0:
		if _, err := os.Stat(runs); err != nil {
			return "", fmt.Errorf("no running `chaos up` found: --runs %s: %w; give --dir", runs, err)
		}
		return "", fmt.Errorf("no running `chaos up` under %s (no */%s); give --dir", runs, rundir.ControlFile)
	case 1:
		return filepath.Dir(found[0]), nil
	}
	var dirs []string
	for _, f := range found {
		dirs = append(dirs, filepath.Dir(f))
	}
	return "", fmt.Errorf("%d runs of `chaos up` under %s (%s); give --dir", len(found), runs, strings.Join(dirs, ", "))
}
