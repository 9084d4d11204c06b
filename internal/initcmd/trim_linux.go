package initcmd

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// trimResident lets go of the pages of init's own executable that its
// start-up touched, and has the kernel fault back only those it uses
// again, one at a time. PID 1 stays resident for a container's life: on a
// read fault the kernel maps up to 64 KiB around the page (fault-around,
// mm/memory.c), so start-up code that never runs again (flag parsing, the
// first sweep, the Go runtime's own start) would otherwise stay counted.
// MADV_RANDOM turns fault-around off for the mapping; MADV_DONTNEED drops
// the pages, which are clean and file-backed: the next use reads them from
// the page cache. Writable mappings (data, heap) are left alone. Best
// effort: nothing changes but the resident set.
func trimResident() {
	self, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode pathname (proc(5))
		fl := strings.Fields(sc.Text())
		if len(fl) < 6 || fl[5] != self || strings.ContainsRune(fl[1], 'w') {
			continue
		}
		from, to, _ := strings.Cut(fl[0], "-")
		lo, err1 := strconv.ParseUint(from, 16, 64)
		hi, err2 := strconv.ParseUint(to, 16, 64)
		if err1 != nil || err2 != nil || hi <= lo {
			continue
		}
		// Raw: the region is this process's own mapping, not Go memory.
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(lo), uintptr(hi-lo), unix.MADV_RANDOM); e == 0 {
			unix.Syscall(unix.SYS_MADVISE, uintptr(lo), uintptr(hi-lo), unix.MADV_DONTNEED)
		}
	}
}
