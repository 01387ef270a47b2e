package docker

import (
	"context"
	"errors"
	"fmt"

	"github.com/moby/moby/client"
)

// CleanReport counts what RemoveLabelled removed.
type CleanReport struct {
	Containers int
	Networks   int
}

// RemoveLabelled removes every container and network of run runID, or of all
// runs when runID is empty. It selects strictly by LabelProject, so objects
// the project did not create are never touched. It keeps going past a failed
// removal and returns all failures joined.
func (e *Engine) RemoveLabelled(ctx context.Context, runID string) (CleanReport, error) {
	var rep CleanReport
	f := client.Filters{}.Add("label", RunSelector(runID)...)
	var errs []error
	cs, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return rep, fmt.Errorf("list labelled containers: %w", err)
	}
	for _, c := range cs.Items {
		if err := e.removeContainer(ctx, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Containers++
	}
	ns, err := e.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return rep, errors.Join(append(errs, fmt.Errorf("list labelled networks: %w", err))...)
	}
	for _, n := range ns.Items {
		if err := e.RemoveNetwork(ctx, n.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Networks++
	}
	return rep, errors.Join(errs...)
}

// RunSelector is the label filter ("key=value", all of which must match)
// that selects the objects of run runID, or of every run when runID is
// empty: removal by label here and in the run's reaper uses the same.
func RunSelector(runID string) []string {
	sel := []string{LabelProject + "=" + projectValue}
	if runID != "" {
		sel = append(sel, LabelRun+"="+runID)
	}
	return sel
}

// CountLabelled returns how many containers and networks of run runID (all
// runs when empty) exist; tests use it to prove nothing leaked.
func (e *Engine) CountLabelled(ctx context.Context, runID string) (CleanReport, error) {
	f := client.Filters{}.Add("label", RunSelector(runID)...)
	cs, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return CleanReport{}, fmt.Errorf("list labelled containers: %w", err)
	}
	ns, err := e.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return CleanReport{}, fmt.Errorf("list labelled networks: %w", err)
	}
	return CleanReport{Containers: len(cs.Items), Networks: len(ns.Items)}, nil
}
