package zkio

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/zklayout"
)

// fakeZK is a Getter and Creator over a map.
type fakeZK map[string][]byte

func (f fakeZK) Get(p string) ([]byte, *zk.Stat, error) {
	b, ok := f[p]
	if !ok {
		return nil, nil, zk.ErrNoNode
	}
	return b, &zk.Stat{Mzxid: int64(len(b)), Version: int32(len(b))}, nil
}

func (f fakeZK) Create(p string, data []byte, _ int32, _ []zk.ACL) (string, error) {
	if _, ok := f[p]; ok {
		return "", zk.ErrNodeExists
	}
	f[p] = data
	return p, nil
}

func (f fakeZK) Delete(p string, version int32) error {
	b, ok := f[p]
	if !ok {
		return zk.ErrNoNode
	}
	if version != -1 && version != int32(len(b)) {
		return zk.ErrBadVersion
	}
	delete(f, p)
	return nil
}

func TestResignController(t *testing.T) {
	ctl := []byte(`{"version":1,"brokerid":2,"timestamp":"1"}`)
	for _, tc := range []struct {
		name string
		z    fakeZK
		id   int
		err  string // "" : deleted
	}{
		{"names the broker", fakeZK{zklayout.ControllerPath: ctl}, 2, ""},
		{"names another broker", fakeZK{zklayout.ControllerPath: ctl}, 3, "/controller names broker 2"},
		{"no controller", fakeZK{}, 2, "read /controller: zk: node does not exist"},
		{"malformed", fakeZK{zklayout.ControllerPath: []byte("{")}, 2, "malformed /controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ResignController(tc.z, tc.id)
			_, left := tc.z[zklayout.ControllerPath]
			switch {
			case tc.err == "" && (err != nil || left):
				t.Fatalf("ResignController = %v, znode left %v; want it deleted", err, left)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("ResignController = %v, want an error containing %q", err, tc.err)
			case tc.err != "" && len(tc.z) > 0 && !left:
				t.Fatal("the znode was deleted although the call failed")
			}
		})
	}
}

func TestReadersAndWriters(t *testing.T) {
	z := fakeZK{
		zklayout.ControllerPath:        []byte(`{"version":1,"brokerid":2,"timestamp":"1"}`),
		zklayout.StatePath("t", 0):     []byte(`{"controller_epoch":1,"leader":3,"version":1,"leader_epoch":4,"isr":[3,1]}`),
		zklayout.StatePath("t", 1):     []byte(`garbage`),
		zklayout.PreferredElectionPath: []byte(`{"version":1,"partitions":[]}`),
	}
	if id, err := ReadController(z); err != nil || id != 2 {
		t.Errorf("ReadController = %d, %v", id, err)
	}
	if st, stat, err := ReadPartitionState(z, "t", 0); err != nil || st.Leader != 3 || !slices.Equal(st.ISR, []int{3, 1}) || stat == nil {
		t.Errorf("ReadPartitionState(t, 0) = %+v, %v, %v", st, stat, err)
	}
	if _, _, err := ReadPartitionState(z, "t", 1); err == nil || !strings.Contains(err.Error(), "malformed partition state "+zklayout.StatePath("t", 1)) {
		t.Errorf("ReadPartitionState(t, 1) over garbage: %v", err)
	}
	if _, _, err := ReadPartitionState(z, "t", 2); !errors.Is(err, zk.ErrNoNode) || !strings.Contains(err.Error(), zklayout.StatePath("t", 2)) {
		t.Errorf("ReadPartitionState of a missing znode: %v, want ErrNoNode naming it", err)
	}
	if err := CreateTopic(z, "u", zklayout.Assignment{0: {1, 2}}); err != nil {
		t.Fatal(err)
	}
	if a, err := ReadAssignment(z, "u"); err != nil || !slices.Equal(a[0], []int{1, 2}) {
		t.Errorf("ReadAssignment after CreateTopic = %v, %v", a, err)
	}
	if err := CreateTopic(z, "u", zklayout.Assignment{0: {1}}); !errors.Is(err, zk.ErrNodeExists) {
		t.Errorf("CreateTopic of an existing topic: %v, want ErrNodeExists", err)
	}
	if err := RequestPreferredElection(z, "t", []int32{0}); !errors.Is(err, zk.ErrNodeExists) || !strings.Contains(err.Error(), zklayout.PreferredElectionPath) {
		t.Errorf("RequestPreferredElection while one is pending: %v", err)
	}
	if err := RequestReassignment(z, []zklayout.Reassignment{{Topic: "t", Partition: 0, Replicas: []int{1, 3}}}); err != nil {
		t.Fatal(err)
	}
	if got := string(z[zklayout.ReassignPath]); got != `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,3]}]}` {
		t.Errorf("reassignment written: %s", got)
	}
}
