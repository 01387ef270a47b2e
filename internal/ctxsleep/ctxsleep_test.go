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

func TestUntil(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		holdAt int // the check at which cond first holds; 0: never
		want   bool
		checks int
	}{
		{"holds at once", context.Background(), 1, true, 1},
		{"holds at the third check", context.Background(), 3, true, 3},
		{"never holds: checked until the deadline", context.Background(), 0, false, -1},
		{"cancelled: one check, then gives up", cancelled, 0, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			got := Until(tt.ctx, 50*time.Millisecond, 5*time.Millisecond, func() bool {
				n++
				return tt.holdAt > 0 && n >= tt.holdAt
			})
			if got != tt.want {
				t.Fatalf("Until = %v, want %v", got, tt.want)
			}
			if tt.checks > 0 && n != tt.checks {
				t.Fatalf("%d checks, want %d", n, tt.checks)
			}
			if tt.checks < 0 && n < 3 {
				t.Fatalf("%d checks within the deadline, want several", n)
			}
		})
	}
}
