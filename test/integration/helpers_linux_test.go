package integration

import (
	"os"
	"syscall"
)

func ownerOf(fi os.FileInfo) int {
	if fi == nil {
		return -1
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
