package hugepage

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// vmFlags returns the VmFlags of the mapping of /proc/self/smaps that
// holds address p.
func vmFlags(t *testing.T, p uintptr) string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") && !strings.HasSuffix(strings.Fields(line)[0], ":") {
			in = lo <= p && p < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return line
		}
	}
	t.Fatalf("no mapping holds %#x", p)
	return ""
}

// A large array is advised (VmFlags "hg" on its whole 2 MB pages); a small
// one is left alone; Make returns the length and capacity asked for.
func TestMakeAdvisesLargeArrays(t *testing.T) {
	tests := []struct {
		name    string
		n       int
		advised bool
	}{
		{"small", 1 << 10, false},
		{"8 MB", 8 << 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Make[byte](tt.n/2, tt.n)
			if len(s) != tt.n/2 || cap(s) != tt.n {
				t.Fatalf("len %d cap %d, want %d and %d", len(s), cap(s), tt.n/2, tt.n)
			}
			// The middle of the array is inside a whole 2 MB page when
			// the array spans more than two of them.
			mid := uintptr(unsafe.Pointer(unsafe.SliceData(s))) + uintptr(tt.n/2)
			flags := vmFlags(t, mid)
			if got := strings.Contains(flags, " hg"); got != tt.advised {
				t.Errorf("%s: advised %v, want %v", flags, got, tt.advised)
			}
		})
	}
}
