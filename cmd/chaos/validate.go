package main

// This file owns the range checks of the run settings and checker knobs
// that commands do before anything reaches Docker. The harness fills a zero
// setting with its default and the cluster refuses an ensemble size only once
// the engine answers, so without them a typo costs a set-up, or runs
// something other than what was asked, before the user hears of it.

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/rundir"
)

// maxFaultDensity is the densest schedule --fault-density asks for.
const maxFaultDensity = 8

// checkRunConfig names, by its flag, every setting of c that no run can
// have: the ones `chaos run` and `chaos power` share.
func checkRunConfig(c harness.RunConfig) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if s := c.ZK.Servers; !cluster.ValidServers(s) {
		bad("--%s %d: want 1, 3 or 5 ZooKeeper servers", rundir.FlagZK, s)
	}
	if c.TimeLimit <= 0 {
		bad("--%s %s: want more than 0", rundir.FlagTimeLimit, c.TimeLimit)
	}
	if c.MinHold < nemesis.MinHold {
		bad("--%s %s: want at least %s", rundir.FlagMinHold, c.MinHold, nemesis.MinHold)
	}
	if c.MaxHold < c.MinHold {
		bad("--%s %s: want at least --%s (%s)", rundir.FlagMaxHold, c.MaxHold, rundir.FlagMinHold, c.MinHold)
	}
	if c.ZKSessionTimeout <= 0 {
		bad("--%s %s: want more than 0", rundir.FlagSessionTimeout, c.ZKSessionTimeout)
	}
	// Written so that NaN, which every comparison fails, is refused too.
	if !(c.Density >= 0 && c.Density <= maxFaultDensity) {
		bad("--%s %g: want 0 (one fault at a time) up to %d", rundir.FlagFaultDensity, c.Density, maxFaultDensity)
	}
	return errors.Join(errs...)
}

// checkKnobs refuses a negative checker knob (a grace, a timeout, a count):
// a checker would judge with it, and say "within -1s", rather than fail.
// It goes through the knobs' own flags, so a new knob is checked without
// being named here.
func checkKnobs(c checkers.Config) error {
	fs := pflag.NewFlagSet("knobs", pflag.ContinueOnError)
	c.RegisterFlags(fs) // binds to the copy c; nothing is parsed
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		v := f.Value.String()
		negative := false
		switch f.Value.Type() {
		case "duration":
			d, err := time.ParseDuration(v)
			negative = err == nil && d < 0
		case "int":
			n, err := strconv.Atoi(v)
			negative = err == nil && n < 0
		}
		if negative {
			errs = append(errs, fmt.Errorf("--%s %s: want 0 or more", f.Name, v))
		}
	})
	// The linearizability checker would take 0 for its default budget while
	// results.json recorded 0s: refused, so what is recorded is what ran.
	if c.LinearizeTimeout == 0 {
		errs = append(errs, errors.New("--linearize-timeout 0s: want more than 0 (porcupine's budget per run)"))
	}
	return errors.Join(errs...)
}
