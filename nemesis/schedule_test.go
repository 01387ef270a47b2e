package nemesis

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPlanIsSeededAndBounded(t *testing.T) {
	tests := []struct {
		name            string
		seed            uint64
		total, min, max time.Duration
		kinds           []FaultKind
		wantSteps       bool
	}{
		{"normal", 1, 60 * time.Second, 2 * time.Second, 6 * time.Second, Catalogue, true},
		{"one kind", 7, 30 * time.Second, time.Second, 3 * time.Second, []FaultKind{PauseController}, true},
		{"too short for any fault", 3, time.Second, 2 * time.Second, 4 * time.Second, Catalogue, false},
		{"no kinds", 3, time.Minute, time.Second, 2 * time.Second, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Plan(tt.seed, tt.total, tt.min, tt.max, tt.kinds)
			b := Plan(tt.seed, tt.total, tt.min, tt.max, tt.kinds)
			if !reflect.DeepEqual(a, b) {
				t.Fatal("same seed gave different schedules")
			}
			if (len(a.Steps) > 0) != tt.wantSteps {
				t.Fatalf("got %d steps, want steps=%v", len(a.Steps), tt.wantSteps)
			}
			var end time.Duration
			for i, st := range a.Steps {
				if st.At < end {
					t.Errorf("step %d starts at %s before the previous ended at %s", i, st.At, end)
				}
				if st.Hold < tt.min || st.Hold > tt.max {
					t.Errorf("step %d holds %s outside [%s,%s]", i, st.Hold, tt.min, tt.max)
				}
				end = st.At + st.Hold
				if end > tt.total {
					t.Errorf("step %d ends at %s after total %s", i, end, tt.total)
				}
			}
		})
	}
	if reflect.DeepEqual(Plan(1, time.Minute, time.Second, 5*time.Second, Catalogue), Plan(2, time.Minute, time.Second, 5*time.Second, Catalogue)) {
		t.Error("different seeds gave the same schedule")
	}
}

func TestParseKinds(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr string
	}{
		{"all", len(Catalogue), ""},
		{"", len(Catalogue), ""},
		{"pause-controller, bounce-node", 2, ""},
		{"pause-controller,nope", 0, `unknown fault "nope"`},
	}
	for _, tt := range tests {
		got, err := ParseKinds(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || len(got) != tt.want {
			t.Errorf("%q: got %d kinds, err %v; want %d", tt.in, len(got), err, tt.want)
		}
	}
}

func TestScheduleRoundTripAndBadFiles(t *testing.T) {
	dir := t.TempDir()
	s := Plan(42, time.Minute, time.Second, 4*time.Second, Catalogue)
	p := filepath.Join(dir, "schedule.json")
	if err := s.Save(p); err != nil {
		t.Fatal(err)
	}
	got, err := LoadSchedule(p)
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip: %v, equal=%v", err, reflect.DeepEqual(got, s))
	}
	bad := map[string]string{
		"garbage.json": "{not json",
		"unknown.json": `{"seed":1,"steps":[{"kind":"melt-cpu"}]}`,
	}
	for name, body := range bad {
		f := filepath.Join(dir, name)
		os.WriteFile(f, []byte(body), 0o644)
		if _, err := LoadSchedule(f); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err %v should name the file", name, err)
		}
	}
}
