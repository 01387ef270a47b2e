package wanterr

import (
	"errors"
	"testing"
)

// recorder is a testing.TB that records a Fatal instead of stopping the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatal(...any)          { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name         string
		err          error
		want         string
		fails, wants bool
	}{
		{"no error wanted, none", nil, "", false, false},
		{"no error wanted, one", errors.New("boom"), "", true, false},
		{"error wanted, matching", errors.New("bad --zk address"), "--zk", false, true},
		{"error wanted, other text", errors.New("bad --id"), "--zk", true, true},
		{"error wanted, none", nil, "--zk", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			if got := Check(r, tc.err, tc.want); got != tc.wants || r.failed != tc.fails {
				t.Errorf("Check = %v, failed %v; want %v, failed %v", got, r.failed, tc.wants, tc.fails)
			}
		})
	}
}
