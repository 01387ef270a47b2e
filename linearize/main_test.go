package linearize

import (
	"testing"

	"go.uber.org/goleak"
)

// Check runs porcupine in goroutines; none may outlive it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
