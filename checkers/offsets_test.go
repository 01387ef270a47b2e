package checkers

import "testing"

// TestOffsetValuesMatchesMap: the dense offset table answers as a map
// would, for offsets in order, far ahead (sparse), negative, and sparse
// ones that the dense part later grows over.
func TestOffsetValuesMatchesMap(t *testing.T) {
	offs := []int64{0, 1, 2, 5, 1 << 40, -3, 10_000, 4, 6000, 3, 9_000, 1 << 40, 7}
	var m offsetValues
	ref := map[int64]seenValue{}
	for i, off := range offs {
		got, ok := m.get(off)
		want, wok := ref[off]
		if ok != wok || got != want {
			t.Fatalf("get(%d) = %v, %v; want %v, %v", off, got, ok, want, wok)
		}
		if !ok {
			v := seenValue{value: "v", idx: i}
			m.set(off, v)
			ref[off] = v
		}
	}
	for off, want := range ref {
		if got, ok := m.get(off); !ok || got != want {
			t.Errorf("get(%d) = %v, %v; want %v", off, got, ok, want)
		}
	}
	if _, ok := m.get(8); ok {
		t.Error("offset 8 was never set")
	}
}
