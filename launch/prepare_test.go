package launch

import (
	"os"
	"syscall"
	"testing"
)

// TestPrepareInterrupted: a SIGINT or SIGTERM that came while the profile
// was loaded ends Prepare before it detects bwrap or makes anything.
func TestPrepareInterrupted(t *testing.T) {
	t.Parallel()
	interrupt := make(chan os.Signal, 1)
	interrupt <- syscall.SIGINT
	_, err := Prepare(Request{Profile: "tier1", Argv: []string{"true"}}, Options{Interrupt: interrupt})
	if err == nil || err.Error() != "interrupted by SIGINT while loading the profile; nothing ran" {
		t.Errorf("Prepare: %v", err)
	}
}
