package checkpoint

import (
	"reflect"
	"testing"
)

// FuzzParseReplicationOffsets: the parser never panics, and whatever it
// accepts formats back to a file that parses to the same map.
func FuzzParseReplicationOffsets(f *testing.F) {
	for _, s := range []string{
		"0\n0\n", "0\n1\nt 0 5\n", "0\n2\na 0 1\nb 3 99\n", "0\n1\nt 0\n", "1\n0\n",
		"0\n1\nt 0 5", "0\n2\nt 0 1\nt 0 2\n", "0\n1\nt -1 0\n", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseReplicationOffsets("fuzz", data)
		if err != nil {
			return
		}
		out, err := FormatReplicationOffsets(m)
		if err != nil {
			t.Fatalf("accepted %q but cannot format it: %v", data, err)
		}
		m2, err := ParseReplicationOffsets("fuzz", out)
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip of %q: %v %v", data, m2, err)
		}
	})
}

// FuzzParseEpochs: never panics; accepted files round-trip exactly.
func FuzzParseEpochs(f *testing.F) {
	for _, s := range []string{
		"0\n0\n", "0\n2\n0 0\n3 10\n", "0\n2\n3 0\n3 5\n", "0\n1\n-1 0\n", "0\n1\n1 2 3\n", "x",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseEpochs("fuzz", data)
		if err != nil {
			return
		}
		e2, err := ParseEpochs("fuzz", FormatEpochs(e))
		if err != nil || !reflect.DeepEqual(e, e2) && len(e) > 0 {
			t.Fatalf("round trip of %q: %v %v", data, e2, err)
		}
	})
}
