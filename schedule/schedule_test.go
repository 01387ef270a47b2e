package schedule

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Schedule
		why  string // what the error names; "" for success
	}{
		{name: "without-skipped.json", body: `{"seed":3,"total_ns":60000000000,"steps":[{"at_ns":1000000000,"kind":"pause-controller","hold_ns":2000000000,"pick":17}]}`,
			want: Schedule{Seed: 3, Total: time.Minute, Steps: []Step{{At: time.Second, Kind: PauseController, Hold: 2 * time.Second, Pick: 17}}}},
		{name: "dense.json", body: `{"seed":1,"total_ns":10,"steps":[{"kind":"failover-on-lagging-zk","hold_ns":1,"opening":true}],"density":2}`,
			want: Schedule{Seed: 1, Total: 10, Steps: []Step{{Kind: FailoverOnLaggingZK, Hold: 1, Opening: true}}, Density: 2}},
		{name: "garbage.json", body: "{not json", why: "invalid character"},
		{name: "empty.json", body: "{}", why: "total_ns is 0"},
		{name: "unknown.json", body: `{"seed":1,"total_ns":1000,"steps":[{"kind":"melt-cpu","hold_ns":1}]}`, why: `step 1: unknown fault "melt-cpu"`},
		{name: "negative-hold.json", body: `{"seed":1,"total_ns":1000,"steps":[{"kind":"pause-node","hold_ns":1},{"kind":"pause-node","hold_ns":-5}]}`, why: "step 2 (pause-node)"},
		{name: "negative-start.json", body: `{"seed":1,"total_ns":1000,"steps":[{"kind":"pause-node","at_ns":-1,"hold_ns":1}]}`, why: "step 1 (pause-node) at -1ns"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.name)
			if err := os.WriteFile(p, []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := Load(p)
			if tt.why != "" {
				if err == nil || !strings.Contains(err.Error(), tt.name) || !strings.Contains(err.Error(), tt.why) {
					t.Fatalf("err %v should name the file and %q", err, tt.why)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
			// What Save writes, Load reads back the same.
			if err := got.Save(p); err != nil {
				t.Fatal(err)
			}
			if again, err := Load(p); err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("round trip: %+v, %v", again, err)
			}
		})
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want a not-exist error", err)
	}
}

func TestMaxOverlap(t *testing.T) {
	tests := []struct {
		name  string
		steps []Step
		want  int
	}{
		{"none", nil, 0},
		{"apart", []Step{{At: 0, Hold: 1}, {At: 5, Hold: 1}}, 1},
		// [0,10) [5,15) [10,11): at 10 the first ends as the third starts.
		{"end meets start", []Step{{At: 0, Hold: 10}, {At: 5, Hold: 10}, {At: 10, Hold: 1}, {At: 20, Hold: 1}}, 2},
		{"nested", []Step{{At: 0, Hold: 10}, {At: 1, Hold: 8}, {At: 2, Hold: 1}}, 3},
	}
	for _, tt := range tests {
		if got := (Schedule{Steps: tt.steps}).MaxOverlap(); got != tt.want {
			t.Errorf("%s: max overlap %d, want %d", tt.name, got, tt.want)
		}
	}
}
