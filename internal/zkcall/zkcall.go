// Package zkcall gives go-zookeeper's requests, which take no context and
// wait as long as the connection lives, a deadline: a ZooKeeper in trouble
// (paused, cut off by the nemesis) must not stall a workload operation or a
// fault past its time. It owns nothing else.
package zkcall

import (
	"context"
	"time"
)

// Do runs fn until it returns or within has passed (or ctx ended). fn keeps
// running in the background after a timeout, as the request cannot be
// cancelled; its result is dropped.
func Do[T any](ctx context.Context, within time.Duration, fn func() (T, error)) (T, error) {
	type res struct {
		v   T
		err error
	}
	ch := make(chan res, 1)
	go func() {
		v, err := fn()
		ch <- res{v, err}
	}()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
