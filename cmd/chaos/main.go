// Command chaos is the harness's one binary. It is deliberately thin: it parses
// flags, calls into harness/ (and friends) and maps outcomes to exit codes. No
// test logic lives here.
//
// Exit codes follow Jepsen: 0 valid, 1 invalid, 2 bad input or harness error,
// 3 unknown (a checker could not decide).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes shared by every subcommand.
const (
	exitValid   = 0
	exitInvalid = 1
	exitBad     = 2
	exitUnknown = 3
)

// exitError carries an exit status out of a cobra RunE without cobra printing
// usage for what is not a usage problem.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// withCode wraps err so main exits with code.
func withCode(code int, err error) error { return &exitError{code: code, err: err} }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "chaos",
		Short:         "Jepsen-style chaos harness for ZooKeeper-mode Kafka epoch fencing",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// A value a flag refuses as it is parsed (an unknown fault kind) is bad
	// input, as is any setting a command refuses after parsing.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withCode(exitBad, err) })
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	return root
}

// subcommands are chaos's commands, each built by its file's constructor.
// They are listed here rather than registered by an init in every file, so
// the list of commands is read in one place; a file may still append its
// command from init (cobra sorts the help by name either way).
var subcommands = []func() *cobra.Command{
	newRunCmd, newCheckCmd, newReportCmd, newServeCmd, newKeepCmd, newShrinkCmd,
	newReproCmd, newReproBenchCmd, newPowerCmd, newUpCmd, newFaultCmd, newCleanCmd, newBenchEnvCmd,
}

func main() {
	// Ctrl-C and SIGTERM cancel the context; commands then heal faults and
	// remove their containers before returning.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err == nil {
		os.Exit(exitValid)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", ee.err)
		}
		os.Exit(ee.code)
	}
	// Anything cobra itself rejects (unknown flag, bad args) is bad input.
	fmt.Fprintln(os.Stderr, "chaos:", err)
	os.Exit(exitBad)
}
