package rundir

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
)

// run.json files written by earlier builds (a dump of the harness's config,
// with keys this struct does not have) read into the same fields.
func TestReadInfoOfEarlierRuns(t *testing.T) {
	dir := t.TempDir()
	old := `{"RunID":"r1","RunDir":"/x/r1","Seed":9,"ZK":{"Servers":3,"TickTime":200000000,"InitLimit":0},"Nodes":3,
"Bugs":["KAFKA-532"],"NodeFlags":null,"ZKSessionTimeout":3000000000,"Topic":"chaos","Partitions":3,"RF":3,"Producers":4,
"Readers":2,"Acks":-1,"NoWorkload":false,"TimeLimit":30000000000,"Faults":["pause-controller"],"MinHold":2000000000,
"MaxHold":6000000000,"Schedule":null,"Settle":10000000000}`
	if err := os.WriteFile(filepath.Join(dir, RunFile), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadInfo(dir)
	want := &Info{RunID: "r1", RunDir: "/x/r1", Seed: 9, ZK: ZK{Servers: 3, TickTime: 200 * time.Millisecond}, Nodes: 3,
		Bugs: []string{"KAFKA-532"}, ZKSessionTimeout: 3 * time.Second, Topic: "chaos", Partitions: 3, RF: 3, Producers: 4,
		Readers: 2, Acks: -1, TimeLimit: 30 * time.Second, Faults: []string{"pause-controller"}, MinHold: 2 * time.Second,
		MaxHold: 6 * time.Second, Settle: 10 * time.Second}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v\nwant %+v", got, err, want)
	}
	if err := WriteInfo(dir, *want); err != nil {
		t.Fatal(err)
	}
	if again, err := ReadInfo(dir); err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("round trip: %+v, %v", again, err)
	}
	if none, err := ReadInfo(t.TempDir()); none != nil || err != nil {
		t.Fatalf("missing run.json: %v, %v", none, err)
	}
}

func TestResultsRoundTripAndBadFiles(t *testing.T) {
	dir := t.TempDir()
	r := &Results{Schema: ResultsSchema, RunDir: dir, CheckedAt: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), Verdict: checkers.Invalid,
		Events: 3, Files: []string{"n1.jsonl"}, Results: []checkers.Result{{Checker: "controller-fencing", Verdict: checkers.Invalid}},
		Config: checkers.DefaultConfig().Knobs()}
	if err := WriteResults(dir, r); err != nil {
		t.Fatal(err)
	}
	got, err := ReadResults(dir)
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	tests := []struct{ body, want string }{
		{`{"verdict":`, ResultsFile},
		{`{"schema":99}`, "newer than this build"},
		{`{"config":{"offline-grace":["30s"]}}`, `config "offline-grace": want a string, number or boolean`},
	}
	for _, tt := range tests {
		os.WriteFile(filepath.Join(dir, ResultsFile), []byte(tt.body), 0o644)
		if _, err := ReadResults(dir); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.body, err, tt.want)
		}
	}
}

// results.json files written before the knobs were recorded by flag name
// read into the same names and values a check writes today.
func TestReadResultsOfEarlierChecks(t *testing.T) {
	dir := t.TempDir()
	old := `{"schema":1,"verdict":"valid","results":[],"config":{"offline_grace":"30s","liveness_grace":"30s",
"max_badversion_retries":3,"linearize_timeout":"30s","strict_reads":true}}`
	if err := os.WriteFile(filepath.Join(dir, ResultsFile), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := CheckConfig{"offline-grace": "30s", "liveness-grace": "30s", "max-badversion-retries": "3",
		"linearize-timeout": "30s", "strict-reads": "true"}
	if !reflect.DeepEqual(got.Config, want) {
		t.Fatalf("config %v, want %v", got.Config, want)
	}
}
