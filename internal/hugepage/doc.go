// Package hugepage asks for transparent huge pages behind large arrays.
//
// Filling fresh memory costs a page fault per 4 KB page, each several
// microseconds on a VM, and on a 1M-event check the faults were a third of
// the CPU time. The decoded history and the checkers' per-partition tables
// are large, filled once and read often: backed by 2 MB pages they fault
// 512 times less. THP in "madvise" mode (the common default) gives them
// only to ranges advised MADV_HUGEPAGE, which is what Advise does.
//
// It owns only that advice: it never changes what a slice holds, an advice
// the kernel refuses is ignored, and it imports no project package.
package hugepage

// Make returns make([]T, n, capacity), advised (Advise) when large.
func Make[T any](n, capacity int) []T {
	s := make([]T, n, capacity)
	Advise(s)
	return s
}
