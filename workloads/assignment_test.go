package workloads

import (
	"maps"
	"slices"
	"testing"
)

func TestDecodeAssignmentTable(t *testing.T) {
	for _, tt := range []struct {
		data    string
		want    map[int32][]int
		wantErr bool
	}{
		{`{"version":2,"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]}}`, map[int32][]int{0: {1, 2, 3}, 1: {2, 3, 1}, 2: {3, 1, 2}}, false},
		{`{"version":1,"partitions":{}}`, map[int32][]int{}, false},
		{`{"partitions":{"x":[1]}}`, nil, true},
		{`{"partitions":{"-1":[1]}}`, nil, true},
		{`not json`, nil, true},
	} {
		got, err := DecodeAssignment("/brokers/topics/chaos", []byte(tt.data))
		if (err != nil) != tt.wantErr {
			t.Errorf("DecodeAssignment(%s): error %v, want error %v", tt.data, err, tt.wantErr)
			continue
		}
		if !maps.EqualFunc(got, tt.want, slices.Equal[[]int]) {
			t.Errorf("DecodeAssignment(%s) = %v, want %v", tt.data, got, tt.want)
		}
	}
}
