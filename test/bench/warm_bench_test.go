package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentjail/agentjail/launch"
	"github.com/agentjail/agentjail/reaper"
)

// warmEnv makes this test binary a warm launcher (warmLaunches).
const warmEnv = "AGENTJAIL_BENCH_WARM"

// warmLaunches is a process that has started once and then launches
// `agentjail run --profile tier1 -- /bin/true` in itself, through
// launch.Run as cmd/agentjail does, each time a line arrives on stdin,
// answering "ok" or what went wrong: what a launch costs when no process
// start-up is paid for it (a resident supervisor, a fork server).
func warmLaunches() int {
	if err := reaper.Begin(); err != nil {
		fmt.Println(err)
		return 1
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var stderr bytes.Buffer
		code := launch.Run(launch.Request{Profile: "tier1", Argv: []string{"/bin/true"}}, launch.IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr})
		if code != 0 {
			fmt.Printf("exit %d: %q\n", code, stderr.String())
			continue
		}
		fmt.Println("ok")
	}
	return 0
}

// BenchmarkLaunchWarm: the tier1 launch of BenchmarkLaunch without the
// start of a process for it: a warm process (this test binary, copied
// beside agentjail's exec stage) runs each launch in itself when asked
// over a pipe (the pipe's round trip is counted against it). Against the
// same reference as BenchmarkLaunch: the floor of a design where a
// resident agentjail launches the jails. Not a target of its own.
func BenchmarkLaunchWarm(b *testing.B) {
	ref, env := launchReference(b, "--profile", "tier1")
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	warm := filepath.Join(filepath.Dir(agentjail), "bench-warm")
	data, err := os.ReadFile(self)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(warm, data, 0o755); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(warm, "-test.run=^$")
	cmd.Env, cmd.Dir = append(env, warmEnv+"=1"), "/"
	ask, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ask.Close(); cmd.Wait() })
	answers := bufio.NewScanner(out)
	subject := func() error {
		if _, err := io.WriteString(ask, "go\n"); err != nil {
			return err
		}
		if !answers.Scan() {
			return fmt.Errorf("the warm launcher ended: %v", answers.Err())
		}
		if a := answers.Text(); a != "ok" {
			return fmt.Errorf("warm launch: %s", a)
		}
		return nil
	}
	for range b.N {
		compare(b, "launch, warm (tier1)", samples(300), "bare bwrap, same argv, no agentjail code", ref, "launch.Run in a started process", subject)
	}
}
