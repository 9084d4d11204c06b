package execstage

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openPty gives the agent a terminal of its own. The stage is not a
// process group leader (bwrap's init is, of the session --new-session
// made), so setsid succeeds and the stage leads a new session, which the
// agent it becomes keeps. The pty is opened in the jail's own devpts
// (bwrap's --dev mounts a new instance): the jail sees only its own
// terminals, and tty(1) names it (/dev/pts/0). The slave is opened through
// the master (TIOCGPTPEER, Linux 4.13: no path lookup), made the session's
// controlling terminal and, once the supervisor has answered the master's
// message (it has set the size and modes by then), the agent's 0, 1 and
// 2. The master leaves the jail: it closes on exec.
func openPty(control int) error {
	if _, err := unix.Setsid(); err != nil {
		return fmt.Errorf("setsid: %w", err)
	}
	master, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /dev/ptmx: %w", err)
	}
	defer unix.Close(master)
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		return fmt.Errorf("unlock the pty: %w", err)
	}
	fd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(master), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return fmt.Errorf("open the pty's slave: %w", errno)
	}
	slave := int(fd)
	defer unix.Close(slave)
	if err := unix.IoctlSetInt(slave, unix.TIOCSCTTY, 0); err != nil {
		return fmt.Errorf("make the pty the controlling terminal: %w", err)
	}
	if err := SendControl(control, Message{Kind: KindPTY, PID: os.Getpid(), PGID: unix.Getpgrp(), Await: true}, master); err != nil {
		return fmt.Errorf("send the pty to the supervisor: %w", err)
	}
	if err := awaitAnswer(control); err != nil {
		return err
	}
	for std := range 3 {
		if err := unix.Dup2(slave, std); err != nil {
			return fmt.Errorf("dup2 the pty's slave to %d: %w", std, err)
		}
	}
	return nil
}
