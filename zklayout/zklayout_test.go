package zklayout

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
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
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), p) {
					t.Fatalf("err %v, want one naming %s and %q", err, p, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
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

// fakeZK is a Getter and Creator over a map.
type fakeZK map[string][]byte

func (f fakeZK) Get(p string) ([]byte, *zk.Stat, error) {
	b, ok := f[p]
	if !ok {
		return nil, nil, zk.ErrNoNode
	}
	return b, &zk.Stat{Mzxid: int64(len(b))}, nil
}

func (f fakeZK) Create(p string, data []byte, _ int32, _ []zk.ACL) (string, error) {
	if _, ok := f[p]; ok {
		return "", zk.ErrNodeExists
	}
	f[p] = data
	return p, nil
}

func TestReadersAndWriters(t *testing.T) {
	z := fakeZK{
		ControllerPath:        []byte(`{"version":1,"brokerid":2,"timestamp":"1"}`),
		StatePath("t", 0):     []byte(`{"controller_epoch":1,"leader":3,"version":1,"leader_epoch":4,"isr":[3,1]}`),
		StatePath("t", 1):     []byte(`garbage`),
		PreferredElectionPath: []byte(`{"version":1,"partitions":[]}`),
	}
	if id, err := ReadController(z); err != nil || id != 2 {
		t.Errorf("ReadController = %d, %v", id, err)
	}
	if st, stat, err := ReadPartitionState(z, "t", 0); err != nil || st.Leader != 3 || !slices.Equal(st.ISR, []int{3, 1}) || stat == nil {
		t.Errorf("ReadPartitionState(t, 0) = %+v, %v, %v", st, stat, err)
	}
	if _, _, err := ReadPartitionState(z, "t", 1); err == nil || !strings.Contains(err.Error(), "malformed partition state "+StatePath("t", 1)) {
		t.Errorf("ReadPartitionState(t, 1) over garbage: %v", err)
	}
	if _, _, err := ReadPartitionState(z, "t", 2); !errors.Is(err, zk.ErrNoNode) || !strings.Contains(err.Error(), StatePath("t", 2)) {
		t.Errorf("ReadPartitionState of a missing znode: %v, want ErrNoNode naming it", err)
	}
	if err := CreateTopic(z, "u", Assignment{0: {1, 2}}); err != nil {
		t.Fatal(err)
	}
	if a, err := ReadAssignment(z, "u"); err != nil || !slices.Equal(a[0], []int{1, 2}) {
		t.Errorf("ReadAssignment after CreateTopic = %v, %v", a, err)
	}
	if err := CreateTopic(z, "u", Assignment{0: {1}}); !errors.Is(err, zk.ErrNodeExists) {
		t.Errorf("CreateTopic of an existing topic: %v, want ErrNodeExists", err)
	}
	if err := RequestPreferredElection(z, "t", []int32{0}); !errors.Is(err, zk.ErrNodeExists) || !strings.Contains(err.Error(), PreferredElectionPath) {
		t.Errorf("RequestPreferredElection while one is pending: %v", err)
	}
	if err := RequestReassignment(z, []Reassignment{{"t", 0, []int{1, 3}}}); err != nil {
		t.Fatal(err)
	}
	if got := string(z[ReassignPath]); got != `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,3]}]}` {
		t.Errorf("reassignment written: %s", got)
	}
}
