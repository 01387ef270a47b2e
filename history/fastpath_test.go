package history

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fastMatchesGeneral decodes line on the fast path and with the general
// decoder; where the fast path takes the line, both must give the same
// Event. It reports whether the fast path took it.
func fastMatchesGeneral(t testing.TB, line []byte) bool {
	t.Helper()
	var fast, slow Event
	var d fastDecoder
	if checkText(line) != nil || !d.decode(line, &fast, "") {
		return false
	}
	if err := decodeEvent(line, &slow, new(eventJSON)); err != nil {
		t.Fatalf("fast path took %s, the general decoder says: %v", line, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("line %s:\nfast    %+v (op %+v)\ngeneral %+v (op %+v)", line, fast, fast.Op, slow, slow.Op)
	}
	return true
}

func TestFastPathMatchesGeneralDecoder(t *testing.T) {
	cases := []struct {
		line string
		fast bool
	}{
		{`{"v":1,"ts":1780000000001000000,"src":"client-0","seq":0,"kind":"op","op":{"type":"invoke","process":0,"f":"produce","topic":"t","partition":0,"value":"p0-c0-0","offset":0,"acks":-1}}`, true},
		{`{"v":1,"ts":1,"src":"c","seq":3,"kind":"op","op":{"type":"ok","process":0,"f":"read","topic":"t","partition":0,"offset":6,"values":["a","b"]}}`, true},
		{`{"v":1,"ts":1,"src":"c","seq":3,"kind":"op","op":{"type":"ok","process":0,"f":"read","topic":"t","partition":0,"offset":6,"from":9,"values":["a"],"broker":2,"leader_epoch":3,"hw":12}}`, true},
		{`{"v":1,"ts":1,"src":"c","seq":3,"kind":"op","op":{"values":["a"],"from":-2,"offset":6,"type":"ok"}}`, true},
		{`{"v":1,"ts":1,"src":"c","seq":3,"kind":"op","op":{"type":"info","process":7,"f":"produce","topic":"t","partition":1,"value":"v","offset":0,"error":"timeout","error_code":-1,"final":true,"idempotent":true}}`, true},
		{`{"v":1,"ts":1,"src":"n1","seq":2,"node":1,"kind":"produce_append","append":{"topic":"t","partition":0,"base_offset":3166,"last_offset":3167,"leader_epoch":1,"acks":-1,"values":["x","y"]}}`, true},
		{`{"v":1,"ts":1,"src":"n1","seq":2,"node":1,"kind":"hw_advance","hw":{"topic":"t","partition":0,"old":3166,"new":3167,"leader_epoch":1}}`, true},
		{`{"v":1,"ts":-0,"src":"é","seq":18446744073709551615,"kind":"phase"}`, true},
		{`{}`, true},
		// Declined: the general decoder decides.
		{`{"v":1,"ts":1,"src":"c","seq":3,"kind":"op","op":{"type":"ok","f":"read","offset":6,"records":[{"offset":6,"value":"a"}]}}`, false},
		{`{"v":1,"ts":1,"src":"c","seq":3,"kind":"op","op":{"type":"ok","f":"read","offset":6,"values":[]}}`, false},
		{`{"v":1,"ts":1,"src":"c","seq":3,"kind":"op","op":{"type":"ok","f":"read","offset":6,"from":3}}`, false},
		{`{"v":1,"ts":1,"src":"c\u0041","seq":3,"kind":"op"}`, false},
		{`{"v":1,"ts":1,"src":"c","seq":3,"kind":"op","op":null}`, false},
		{`{"v":1, "ts":1}`, false},
		{`{"v":1,"ts":1} `, false},
		{`{"v":1,"ts":1.0}`, false},
		{`{"v":1,"ts":1e3}`, false},
		{`{"v":01}`, false},
		{`{"v":+1}`, false},
		{`{"v":1,"v":2}`, false},
		{`{"V":1}`, false},
		{`{"v":1,"extra":2}`, false},
		{`{"seq":-1}`, false},
		{`{"ts":9223372036854775808}`, false},
		{`{"ts":-9223372036854775808}`, true},
		{`{"node":2147483648}`, false},
		{`{"kind":"op","op":{"error_code":32768}}`, false},
		{`{"kind":"op","op":{"partition":-2147483649}}`, false},
		{`{"kind":"op","op":{"final":tru}}`, false},
		{`{"kind":"nope"}`, false},
		{`{"kind":"zk_write","zk_write":{"path":"/x"}}`, false},
		{`{"v":1`, false},
		{`{"v":1}}`, false},
		{`[1]`, false},
	}
	for _, tc := range cases {
		if got := fastMatchesGeneral(t, []byte(tc.line)); got != tc.fast {
			t.Errorf("fast path took %s: %v, want %v", tc.line, got, tc.fast)
		}
	}
}

// TestFastPathOnStoredRun: every line of a real run's history decodes the
// same on both paths, and the common kinds take the fast one.
func TestFastPathOnStoredRun(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "kafka532-run", HistoryDir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no stored run: %v", err)
	}
	lines, fast := 0, 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, MaxLineBytes)
		for sc.Scan() {
			lines++
			if fastMatchesGeneral(t, sc.Bytes()) {
				fast++
			}
		}
	}
	t.Logf("%d of %d lines on the fast path", fast, lines)
	if fast < lines/2 {
		t.Errorf("only %d of %d lines on the fast path", fast, lines)
	}
}

// FuzzFastPath: whatever the line, the fast path either declines it or
// decodes it exactly as the general decoder does.
func FuzzFastPath(f *testing.F) {
	f.Add([]byte(`{"v":1,"ts":1,"src":"c","seq":3,"kind":"op","op":{"type":"ok","process":0,"f":"read","topic":"t","partition":0,"offset":6,"from":9,"values":["a"],"broker":2,"leader_epoch":3,"hw":12}}`))
	f.Add([]byte(`{"v":1,"ts":1,"src":"n1","seq":2,"node":1,"kind":"produce_append","append":{"topic":"t","partition":0,"base_offset":3166,"last_offset":3167,"leader_epoch":1,"acks":-1,"values":["x","y"]}}`))
	f.Add([]byte(`{"v":1,"ts":1,"src":"n1","seq":2,"node":1,"kind":"hw_advance","hw":{"topic":"t","partition":0,"old":3166,"new":3167,"leader_epoch":1}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		fastMatchesGeneral(t, line)
	})
}
