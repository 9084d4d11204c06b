package procs

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeProc writes a process into a fixture procfs tree: environ (nil: the
// file is missing, as for a process that vanished), stat, cmdline.
func fakeProc(t *testing.T, root string, pid, ppid int, comm string, environ []string, cmdline ...string) {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice threads
	// itrealvalue starttime ...
	stat := fmt.Sprintf("%d (%s) S %d %d %d 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 %d 1000 200\n", pid, comm, ppid, pid, pid, 7000+pid)
	os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644)
	os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.Join(cmdline, "\x00")), 0o644)
	if environ != nil {
		os.WriteFile(filepath.Join(dir, "environ"), []byte(strings.Join(environ, "\x00")+"\x00"), 0o644)
	}
}

func TestMarkedFindsExactMarkersOnly(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	fakeProc(t, root, 1, 0, "init", []string{"PATH=/bin"}, "/sbin/init")
	fakeProc(t, root, 100, 1, "bwrap", []string{"PATH=/bin", "AGENTJAIL_RUN=runa", "HOME=/x"}, "bwrap", "--unshare-pid")
	fakeProc(t, root, 101, 100, "sh", []string{"AGENTJAIL_RUN=runa"}, "sh", "-c", "sleep 1")             // marker first
	fakeProc(t, root, 102, 1, "decoy", []string{"XAGENTJAIL_RUN=runa", "A=AGENTJAIL_RUN=runa"}, "decoy") // not the variable
	fakeProc(t, root, 103, 1, "decoy", []string{"AGENTJAIL_RUN=runa2"}, "decoy")                         // another run
	fakeProc(t, root, 104, 1, "decoy", []string{"AGENTJAIL_RUN="}, "decoy")                              // empty
	fakeProc(t, root, 105, 1, "gone", nil, "gone")                                                       // environ missing
	fakeProc(t, root, 106, 101, "a) (b", []string{"AGENTJAIL_RUN=runa"})                                 // no cmdline, odd comm
	// A very large environment, the marker at its very end.
	big := []string{"FILL=" + strings.Repeat("x", 200<<10), "AGENTJAIL_RUN=runb"}
	fakeProc(t, root, 107, 1, "big", big, "big")
	os.Symlink("100", filepath.Join(root, "self"))
	os.MkdirAll(filepath.Join(root, "sys"), 0o755)

	m, err := Marked(root)
	if err != nil {
		t.Fatal(err)
	}
	pids := func(ps []Proc) []int {
		var out []int
		for _, p := range ps {
			out = append(out, p.PID)
		}
		slices.Sort(out)
		return out
	}
	if got := pids(m["runa"]); !slices.Equal(got, []int{100, 101, 106}) {
		t.Errorf("runa: %v, want [100 101 106]", got)
	}
	if got := pids(m["runa2"]); !slices.Equal(got, []int{103}) {
		t.Errorf("runa2: %v", got)
	}
	if got := pids(m["runb"]); !slices.Equal(got, []int{107}) {
		t.Errorf("runb (marker after 200 KiB): %v", got)
	}
	if len(m) != 3 {
		t.Errorf("run ids %v, want runa, runa2, runb", m)
	}
	only, err := MarkedBy(root, "runa", Since{})
	if err != nil || !slices.Equal(pids(only), []int{100, 101, 106}) {
		t.Errorf("MarkedBy runa: %v %v", pids(only), err)
	}
	for _, p := range only {
		switch p.PID {
		case 101:
			if p.PPID != 100 || p.Cmd != "sh -c sleep 1" || p.Start != 7101 {
				t.Errorf("pid 101 read as %+v", p)
			}
		case 106:
			if p.PPID != 101 || p.Cmd != "[a) (b]" {
				t.Errorf("pid 106 read as %+v", p)
			}
		}
	}
}

func TestAncestorsStopAtPID1(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	fakeProc(t, root, 1, 0, "init", nil)
	fakeProc(t, root, 50, 1, "sshd", nil)
	fakeProc(t, root, 60, 50, "bash", nil)
	fakeProc(t, root, 70, 60, "agentjail", nil)
	fakeProc(t, root, 80, 70, "bwrap", nil)
	got := ancestors(root, 70)
	for _, pid := range []int{1, 50, 60, 70} {
		if !got[pid] {
			t.Errorf("ancestors of 70 lack %d: %v", pid, got)
		}
	}
	if got[80] || len(got) != 4 {
		t.Errorf("ancestors of 70: %v", got)
	}
	if st, err := ReadStat(root, 80); err != nil || st.PGID != 80 {
		t.Errorf("pgid of 80: %+v %v", st, err)
	}
}

func TestParseStatRefusesGarbage(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "12 (x", "12 (x) S 1 2 3", "12 (x) S notanumber " + strings.Repeat("0 ", 20)} {
		if _, err := ParseStat([]byte(s)); err == nil {
			t.Errorf("ParseStat(%q) accepted", s)
		}
	}
}

// TestMarkedBySince: a scan after a mark looks at the pids handed out
// since, wrapping at pid_max, and at every pid once pid_max processes may
// have been created, or without the marks.
func TestMarkedBySince(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, pid := range []int{5, 50, 95, 200} {
		fakeProc(t, root, pid, 1, "agent", []string{MarkerVar + "=run"}, "agent")
	}
	marks := func(last, forks int) {
		os.MkdirAll(filepath.Join(root, "sys/kernel"), 0o755)
		os.WriteFile(filepath.Join(root, "sys/kernel/ns_last_pid"), []byte(fmt.Sprintf("%d\n", last)), 0o644)
		os.WriteFile(filepath.Join(root, "sys/kernel/pid_max"), []byte("300\n"), 0o644)
		os.WriteFile(filepath.Join(root, "stat"), []byte(fmt.Sprintf("cpu 1 2 3\nprocesses %d\nprocs_running 1\n", forks)), 0o644)
	}
	pids := func(ps []Proc) []int {
		var out []int
		for _, p := range ps {
			out = append(out, p.PID)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		name            string
		from, to, forks int
		want            []int
	}{
		{"a range", 40, 100, 60, []int{50, 95}},
		{"wrapped", 150, 10, 160, []int{5, 200}},
		{"pid_max processes since", 40, 100, 300, []int{5, 50, 95, 200}},
	} {
		marks(c.from, 1000)
		since := Mark(root)
		marks(c.to, 1000+c.forks)
		got, err := MarkedBy(root, "run", since)
		if err != nil || !slices.Equal(pids(got), c.want) {
			t.Errorf("%s: %v %v, want %v", c.name, pids(got), err, c.want)
		}
	}
	if got, _ := MarkedBy(root, "run", Since{}); len(got) != 4 {
		t.Errorf("no mark: %v", pids(got))
	}
}

// TestBelowHoldsTheTree: Below finds what a process started, one in a
// session of its own and a grandchild included, each held by a pidfd; a
// mark taken once they ran leaves them all out.
func TestBelowHoldsTheTree(t *testing.T) {
	t.Parallel()
	since := Mark("/proc")
	cmd := exec.Command("sh", "-c", `setsid sleep 100 & sh -c 'sleep 100 & wait' & echo started; wait`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	bufio.NewReader(out).ReadString('\n')
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	comms := func(since Since) []string {
		held, err := Below("/proc", cmd.Process.Pid, fd, since)
		if err != nil {
			t.Fatal(err)
		}
		defer Release(held)
		var out []string
		for _, h := range held {
			if unix.PidfdSendSignal(h.FD, 0, nil, 0) != nil {
				t.Errorf("pid %d is not held", h.PID)
			}
			out = append(out, h.Comm)
		}
		slices.Sort(out)
		return out
	}
	want := []string{"sh", "sleep", "sleep"}
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got = comms(since); slices.Equal(got, want) {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("below sh: %v, want %v", got, want)
	}
	if got := comms(Mark("/proc")); len(got) != 0 {
		t.Errorf("created before the mark, found: %v", got)
	}
	if got := comms(Since{}); !slices.Equal(got, want) {
		t.Errorf("without a mark: %v, want %v", got, want)
	}
}
