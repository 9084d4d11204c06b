//go:build !amd64

package main

// int80Getpid has no i386 entry to call on this architecture.
func int80Getpid() int32 { return -1 }
