package hugepage

import (
	"syscall"
	"unsafe"
)

// hugePageSize is the size of a transparent huge page on the platforms Go
// supports on Linux that this matters for (amd64, arm64 with 4K pages).
const hugePageSize = 2 << 20

// Advise asks the kernel to back the whole 2 MB pages of s's backing
// array with transparent huge pages (MADV_HUGEPAGE), which it does on
// first touch when THP is in "madvise" mode, the common default. Filling a
// 1M-event history touched some 50,000 fresh 4 KB pages for the merged
// events alone, each a page fault (about 5 µs on a VM); huge pages make that
// 100 faults. Only large arrays are worth it; failure is harmless (the
// memory is then faulted in 4 KB pages as before).
func Advise[T any](s []T) {
	var zero T
	n := uintptr(cap(s)) * unsafe.Sizeof(zero)
	if n < hugePageSize {
		return
	}
	base := unsafe.Pointer(unsafe.SliceData(s))
	p := uintptr(base)
	start := (p + hugePageSize - 1) &^ (hugePageSize - 1)
	end := (p + n) &^ (hugePageSize - 1)
	if end <= start {
		return
	}
	whole := unsafe.Slice((*byte)(unsafe.Add(base, start-p)), end-start)
	_ = syscall.Madvise(whole, syscall.MADV_HUGEPAGE)
}
