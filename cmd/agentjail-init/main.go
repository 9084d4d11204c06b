// Command agentjail-init is `agentjail init` after its flags are parsed:
// the reaper, signal forwarding and dead-run sweep of PID 1, in a binary
// small enough to stay resident for a container's life (internal/initcmd).
// agentjail execs it; it is not meant to be run by hand.
package main

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/internal/initcmd"
	"github.com/agentjail/agentjail/record"
)

func main() {
	// agentjail execs this binary through a descriptor (/proc/self/fd/N),
	// which the kernel would make its name: ps and /proc/1/comm should say
	// what PID 1 is.
	name := []byte(initcmd.Name + "\x00")
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
	o, argv, err := initcmd.Parse(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "agentjail: init: %v\n", err)
		os.Exit(record.ExitSetup)
	}
	os.Exit(initcmd.Run(o, argv, os.Stdin, os.Stdout, os.Stderr))
}
