package zkcall

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDo(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	for _, tt := range []struct {
		name    string
		fn      func() (int, error)
		want    int
		wantErr error
	}{
		{"answers", func() (int, error) { return 7, nil }, 7, nil},
		{"fails", func() (int, error) { return 0, errors.ErrUnsupported }, 0, errors.ErrUnsupported},
		{"hangs", func() (int, error) { <-block; return 1, nil }, 0, context.DeadlineExceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, err := Do(t.Context(), 50*time.Millisecond, tt.fn)
			if v != tt.want || !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %d, %v; want %d, %v", v, err, tt.want, tt.wantErr)
			}
		})
	}
}
