//go:build linux && cgo

package sigstart

/*
#include <signal.h>
#include <stdint.h>

static uint64_t ignored_at_start;

__attribute__((constructor)) static void record_ignored_at_start(void) {
	for (int s = 1; s <= 64; s++) {
		struct sigaction sa;
		if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
			ignored_at_start |= (uint64_t)1 << (s - 1);
	}
}

static uint64_t sigstart_ignored(void) { return ignored_at_start; }
*/
import "C"

// Ignored is the set of signals that were ignored when the process
// started: bit n-1 for signal n.
func Ignored() uint64 { return uint64(C.sigstart_ignored()) }
