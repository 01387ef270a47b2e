package group

import "time"

// Clock is the coordinator's time source. Tests inject a manual clock so
// session timeouts and rebalance delays elapse without waiting.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f once, on some goroutine, after d.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a scheduled AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; the coordinator also
	// ignores calls that lose a race with Stop.
	Stop() bool
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
