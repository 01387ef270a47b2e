package zklayout

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestPaths(t *testing.T) {
	tests := []struct{ got, want string }{
		{StatePath("chaos", 3), "/brokers/topics/chaos/partitions/3/state"},
		{TopicPath("chaos-rf2"), "/brokers/topics/chaos-rf2"},
		{BrokerPath(12), "/brokers/ids/12"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("path %q, want %q", tt.got, tt.want)
		}
	}
}

func TestParseStatePath(t *testing.T) {
	tests := []struct {
		p         string
		topic     string
		partition int32
		ok        bool
	}{
		{"/brokers/topics/chaos/partitions/0/state", "chaos", 0, true},
		{"/brokers/topics/chaos-admin-7/partitions/12/state", "chaos-admin-7", 12, true},
		{"/brokers/topics/chaos/partitions/x/state", "", 0, false},
		{"/brokers/topics/chaos/partitions/-1/state", "", 0, false},
		{"/brokers/topics/chaos/partitions/0", "", 0, false},
		{"/brokers/topics//partitions/0/state", "", 0, false},
		{"/brokers/topics/a/b/partitions/0/state", "", 0, false},
		{"/controller", "", 0, false},
		{"/other/topics/chaos/partitions/0/state", "", 0, false},
	}
	for _, tt := range tests {
		topic, p, ok := ParseStatePath(tt.p)
		if topic != tt.topic || p != tt.partition || ok != tt.ok {
			t.Errorf("ParseStatePath(%q) = %q, %d, %v; want %q, %d, %v", tt.p, topic, p, ok, tt.topic, tt.partition, tt.ok)
		}
		if ok && StatePath(topic, p) != tt.p {
			t.Errorf("StatePath(ParseStatePath(%q)) = %q", tt.p, StatePath(topic, p))
		}
	}
}

func TestDecodePartitionState(t *testing.T) {
	const p = "/brokers/topics/t/partitions/0/state"
	tests := []struct {
		name    string
		data    string
		want    PartitionState
		wantErr string // "" for success
	}{
		{"as the controller writes it", `{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":7,"isr":[2,3]}`, PartitionState{Leader: 2, LeaderEpoch: 7, ControllerEpoch: 3, ISR: []int{2, 3}}, ""},
		{"no leader", `{"controller_epoch":3,"leader":-1,"version":1,"leader_epoch":8,"isr":[2]}`, PartitionState{Leader: -1, LeaderEpoch: 8, ControllerEpoch: 3, ISR: []int{2}}, ""},
		{"empty isr", `{"controller_epoch":1,"leader":-1,"version":1,"leader_epoch":0,"isr":[]}`, PartitionState{Leader: -1, ControllerEpoch: 1, ISR: []int{}}, ""},
		{"bad json", `{"leader":2,`, PartitionState{}, "malformed partition state " + p},
		{"empty data", ``, PartitionState{}, "unexpected end of JSON input"},
		{"wrong type", `{"controller_epoch":3,"leader":"two","leader_epoch":7,"isr":[2]}`, PartitionState{}, "cannot unmarshal string"},
		{"missing fields", `{"leader":2,"isr":[2]}`, PartitionState{}, "no leader_epoch, controller_epoch"},
		{"missing isr", `{"controller_epoch":3,"leader":2,"leader_epoch":7}`, PartitionState{}, "no isr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodePartitionState(p, []byte(tt.data))
			wantDecoded(t, p, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestDecodeController(t *testing.T) {
	tests := []struct {
		data    string
		want    int
		wantErr string
	}{
		{`{"version":1,"brokerid":3,"timestamp":"1700000000000"}`, 3, ""},
		{`{"version":1,"timestamp":"1"}`, 0, "no brokerid"},
		{`{"brokerid":`, 0, "malformed /controller"},
		{`{"brokerid":"3"}`, 0, "cannot unmarshal"},
	}
	for _, tt := range tests {
		got, err := DecodeController([]byte(tt.data))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("DecodeController(%s): err %v, want %q", tt.data, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("DecodeController(%s) = %d, %v; want %d", tt.data, got, err, tt.want)
		}
	}
}

func TestDecodeControllerEpoch(t *testing.T) {
	tests := []struct {
		data    string
		want    int32
		wantErr bool
	}{
		{"5", 5, false},
		{"0", 0, false},
		{"", 0, true},
		{" 5", 0, true},
		{"99999999999", 0, true},
		{`{"epoch":5}`, 0, true},
	}
	for _, tt := range tests {
		got, err := DecodeControllerEpoch([]byte(tt.data))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("DecodeControllerEpoch(%q) = %d, %v; want %d, error %v", tt.data, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), ControllerEpochPath) {
			t.Errorf("DecodeControllerEpoch(%q): %v does not name the znode", tt.data, err)
		}
	}
}

func TestDecodeAssignment(t *testing.T) {
	for _, tt := range []struct {
		data    string
		want    Assignment
		wantErr bool
	}{
		{`{"version":2,"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]}}`, Assignment{0: {1, 2, 3}, 1: {2, 3, 1}, 2: {3, 1, 2}}, false},
		{`{"version":2,"partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{}}`, Assignment{0: {1, 2}}, false},
		{`{"version":1,"partitions":{}}`, Assignment{}, false},
		{`{"partitions":{"x":[1]}}`, nil, true},
		{`{"partitions":{"-1":[1]}}`, nil, true},
		{`not json`, nil, true},
	} {
		got, err := DecodeAssignment("/brokers/topics/chaos", []byte(tt.data))
		if (err != nil) != tt.wantErr {
			t.Errorf("DecodeAssignment(%s): error %v, want error %v", tt.data, err, tt.wantErr)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), "/brokers/topics/chaos") {
			t.Errorf("DecodeAssignment(%s): %v does not name the znode", tt.data, err)
		}
		if !maps.EqualFunc(got, tt.want, slices.Equal[[]int]) {
			t.Errorf("DecodeAssignment(%s) = %v, want %v", tt.data, got, tt.want)
		}
	}
}

func TestEncoders(t *testing.T) {
	enc := func(b []byte, err error) string {
		if err != nil {
			return "error: " + err.Error()
		}
		return string(b)
	}
	tests := []struct{ name, got, want string }{
		{"assignment", enc(EncodeAssignment(Assignment{0: {1, 2}, 1: {2, 1}})), `{"version":2,"partitions":{"0":[1,2],"1":[2,1]}}`},
		{"assignment without replicas", enc(EncodeAssignment(Assignment{0: nil})), "error: topic assignment: partition 0 with replicas []"},
		{"reassignment", enc(EncodeReassignment([]Reassignment{{"t", 2, []int{3, 1}}})), `{"version":1,"partitions":[{"topic":"t","partition":2,"replicas":[3,1]}]}`},
		{"empty reassignment", enc(EncodeReassignment(nil)), "error: reassignment of no partition"},
		{"preferred election", enc(EncodePreferredElection("t", []int32{0, 4})), `{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":4}]}`},
		{"empty preferred election", enc(EncodePreferredElection("t", nil)), "error: preferred election of no partition of t"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, tt.got, tt.want)
		}
	}
	// What is encoded decodes back.
	b, _ := EncodeAssignment(Assignment{0: {1, 2}, 5: {3}})
	if a, err := DecodeAssignment("/brokers/topics/t", b); err != nil || !maps.EqualFunc(a, Assignment{0: {1, 2}, 5: {3}}, slices.Equal[[]int]) {
		t.Errorf("assignment round trip: %v, %v", a, err)
	}
}

func TestDecodeISRChangeNotification(t *testing.T) {
	const p = "/isr_change_notification/isr_change_0000000007"
	tests := []struct {
		name    string
		data    string
		want    []NotifiedPartition
		wantErr string // "" for success
	}{
		{"as a leader writes it", `{"version":1,"partitions":[{"topic":"chaos","partition":0},{"topic":"chaos-rf2","partition":2}]}`,
			[]NotifiedPartition{{"chaos", 0}, {"chaos-rf2", 2}}, ""},
		{"bad json", `{"version":1,"partitions":[`, nil, "unexpected end of JSON input"},
		{"other version", `{"version":2,"partitions":[]}`, nil, "version 2, want 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeISRChangeNotification(p, []byte(tt.data))
			wantDecoded(t, p, got, err, tt.want, tt.wantErr)
		})
	}
}

// wantDecoded checks a decoder's answer: an error naming p and containing
// wantErr when wantErr is set, else want.
func wantDecoded(t *testing.T, p string, got any, err error, want any, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), p) {
			t.Fatalf("err %v, want one naming %s and %q", err, p, wantErr)
		}
		return
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
}
