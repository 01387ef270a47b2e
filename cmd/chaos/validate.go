package main

// This file owns the range checks of the checker knobs that commands do
// before anything reaches Docker (a run's settings check themselves:
// rundir.RunSpec.Validate). Without them a typo costs a set-up, or judges
// with something other than what was asked, before the user hears of it.

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/zkchaos/zkchaos/checkers"
)

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
