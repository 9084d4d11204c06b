package main

// int80Getpid calls getpid (20 on i386) through the i386 entry, int 0x80.
func int80Getpid() int32
