package ctxsleep

import (
	"context"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want bool
	}{
		{name: "slept", ctx: context.Background(), d: time.Millisecond, want: true},
		{name: "nothing to wait", ctx: context.Background(), d: 0, want: true},
		{name: "cancelled before", ctx: done, d: time.Hour, want: false},
		{name: "cancelled, nothing to wait", ctx: done, d: -time.Second, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := For(tc.ctx, tc.d); got != tc.want {
				t.Fatalf("For(%s) = %v, want %v", tc.d, got, tc.want)
			}
		})
	}
}
