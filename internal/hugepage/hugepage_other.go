//go:build !linux

package hugepage

// Advise is a no-op where transparent huge pages are not a Linux madvise
// away (see hugepage_linux.go).
func Advise[T any](s []T) {}
