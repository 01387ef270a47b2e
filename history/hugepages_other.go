//go:build !linux

package history

// adviseHuge is a no-op where transparent huge pages are not a Linux
// madvise away (see hugepages_linux.go).
func adviseHuge[T any](s []T) {}
