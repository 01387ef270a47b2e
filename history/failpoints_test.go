package history

import (
	"slices"
	"testing"
)

// The failpoint names are a contract: a saved schedule names them and the
// nemesis plans over them by index. New windows go at the end; a rename or
// a reorder fails here, with the literal list as it was last extended.
func TestFailpointNamesOnlyGrow(t *testing.T) {
	want := []string{"controller-after-zk-write", "controller-before-broker-change", "broker-before-register",
		"broker-during-controlled-shutdown", "broker-after-register", "follower-after-truncation", "controller-before-elect",
		"controller-after-elected", "controller-before-send", "controller-before-controlled-shutdown", "leader-before-txn-append"}
	if !slices.Equal(FailpointNames, want) {
		t.Fatalf("failpoints %v, want %v", FailpointNames, want)
	}
}
