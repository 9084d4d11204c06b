package reaper

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The reaper takes over wait4(-1) for the whole process, so its tests run
// in a helper process: the test binary re-executed (os/exec's pattern).
func TestMain(m *testing.M) {
	if os.Getenv("REAPER_TEST_HELPER") == "1" {
		os.Exit(helper())
	}
	os.Exit(m.Run())
}

// helper starts children that exit with known codes, among them one that
// leaves orphans behind, and reports what Wait saw and what was reaped.
func helper() int {
	if err := Begin(); err != nil {
		fmt.Println("begin:", err)
		return 1
	}
	var cmds []*exec.Cmd
	for i := range 20 {
		cmd := exec.Command("sh", "-c", fmt.Sprintf("exit %d", i))
		if err := Start(cmd); err != nil {
			fmt.Println("start:", err)
			return 1
		}
		cmds = append(cmds, cmd)
	}
	// Double-forked orphans: re-parented to us, reaped, counted.
	orphanMaker := exec.Command("sh", "-c", "for i in 1 2 3 4 5; do (sleep 0.05 &) ; done; exit 42")
	if err := Start(orphanMaker); err != nil {
		fmt.Println("start:", err)
		return 1
	}
	for i, cmd := range cmds {
		ws, err := Wait(cmd)
		if err != nil || ws.ExitStatus() != i {
			fmt.Printf("child %d: status %d, %v\n", i, ws.ExitStatus(), err)
			return 1
		}
	}
	ch, err := Done(orphanMaker)
	if err != nil {
		fmt.Println("done:", err)
		return 1
	}
	ws := <-ch
	Release(orphanMaker)
	deadline := time.Now().Add(10 * time.Second)
	for Orphans() < 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Printf("orphan-maker=%d orphans=%d zombies=%d\n", ws.ExitStatus(), Orphans(), zombies(os.Getpid()))
	return 0
}

// zombies counts zombie children of pid.
func zombies(pid int) int {
	n := 0
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
		var state string
		var ppid int
		fmt.Sscanf(rest, "%s %d", &state, &ppid)
		if ppid == pid && state == "Z" {
			n++
		}
	}
	return n
}

func TestReaperDeliversStatusesAndReapsOrphans(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "REAPER_TEST_HELPER=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "orphan-maker=42 orphans=5 zombies=0" {
		t.Errorf("helper reported %q", got)
	}
}
