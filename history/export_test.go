package history

// SetUnmarshal swaps the line decoder for a benchmark and returns a
// function that restores it.
func SetUnmarshal(f func([]byte, any) error) (restore func()) {
	old := unmarshal
	unmarshal = f
	return func() { unmarshal = old }
}
