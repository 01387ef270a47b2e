package wanttext

import "testing"

// recorder counts the failures Contains reports.
type recorder struct {
	testing.TB
	failures int
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failures++ }

func TestContains(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wants []string
		fails int
	}{
		{"every phrase there", []string{"a b", "c"}, 0},
		{"one missing", []string{"a b", "d"}, 1},
		{"each missing one counted", []string{"x", "y", "c"}, 2},
		{"nothing wanted", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			Contains(r, "text", "a b c", tc.wants...)
			if r.failures != tc.fails {
				t.Fatalf("%d failures, want %d", r.failures, tc.fails)
			}
		})
	}
}
