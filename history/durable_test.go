package history

import (
	"maps"
	"strings"
	"testing"
)

func TestDurableLengthsRoundTripAndRefusals(t *testing.T) {
	seg0, seg1 := "00000000000000000000.log", "00000000000000000042.log"
	cases := []struct {
		name string
		in   string
		want map[string]int64
		err  string
	}{
		{name: "two segments", in: "0\n2\n" + seg0 + " 4096\n" + seg1 + " 0\n", want: map[string]int64{seg0: 4096, seg1: 0}},
		{name: "none", in: "0\n0\n", want: map[string]int64{}},
		{name: "unknown version", in: "1\n0\n", err: "version"},
		{name: "count too high", in: "0\n2\n" + seg0 + " 1\n", err: "count"},
		{name: "negative length", in: "0\n1\n" + seg0 + " -1\n", err: "byte count"},
		{name: "path not a file name", in: "0\n1\n../x.log 1\n", err: "is not"},
		{name: "listed twice", in: "0\n2\n" + seg0 + " 1\n" + seg0 + " 2\n", err: "twice"},
		{name: "empty", in: "", err: "lines"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseDurableLengths([]byte(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, c.want) {
				t.Fatalf("parsed %v, want %v", got, c.want)
			}
			if back := string(FormatDurableLengths(got)); back != c.in {
				t.Fatalf("formatted %q, want %q", back, c.in)
			}
		})
	}
}
