// Command forker makes processes that do nothing until killed, as fast as
// the kernel lets it: the exhaustion tests' fork bomb, without a shell's
// cost per fork (on a busy two-CPU host a shell bomb takes most of a
// minute to reach a cap of a few thousand).
//
//	forker N        fork until N children run or a fork fails; print
//	                "forked K" and exit (the children die with the jail)
//	forker -hold N  the same, then go on retrying every fork that fails,
//	                as a fork bomb at a cap does; never exits
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

func main() {
	args := os.Args[1:]
	hold := len(args) > 0 && args[0] == "-hold"
	if hold {
		args = args[1:]
	}
	n, err := strconv.Atoi(args[0])
	if len(args) != 1 || err != nil {
		fmt.Fprintln(os.Stderr, "usage: forker [-hold] N")
		os.Exit(2)
	}
	k := 0
	for k < n {
		if _, errno := forkPause(); errno != 0 {
			fmt.Fprintf(os.Stderr, "forker: fork %d: %v\n", k+1, errno)
			break
		}
		k++
	}
	fmt.Printf("forked %d\n", k)
	for hold {
		if _, errno := forkPause(); errno != 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// forkPause forks a child that only waits for a signal. The child runs no
// Go code: it has one thread of a multi-threaded runtime, so only raw
// system calls from nosplit code are safe in it (as in syscall's
// forkAndExecInChild).
//
//go:nosplit
func forkPause() (uintptr, syscall.Errno) {
	pid, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if errno != 0 || pid != 0 {
		return pid, errno
	}
	for {
		syscall.RawSyscall(syscall.SYS_PAUSE, 0, 0, 0)
	}
}
