package initcmd

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestArgsParse: what agentjail hands agentjail-init reads back the same,
// whatever the command's own arguments look like.
func TestArgsParse(t *testing.T) {
	for _, o := range []Options{
		{Grace: 5 * time.Second, SweepEvery: 10 * time.Second},
		{Grace: 1500 * time.Millisecond, ChildOnly: true, Verbose: true},
		{},
	} {
		argv := []string{"sh", "-c", "exit 3", "--grace=1h", "--"}
		got, gotArgv, err := Parse(o.Args(argv))
		if err != nil || got != o || !reflect.DeepEqual(gotArgv, argv) {
			t.Errorf("Parse(Args(%+v, %q)) = %+v, %q, %v", o, argv, got, gotArgv, err)
		}
	}
}

// TestParseRefuses: agentjail-init run by hand with what it does not take
// says so and points at agentjail init.
func TestParseRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--grace=soon", "--", "true"}, "agentjail-init is started by `agentjail init`"},
		{[]string{"--grace=-1s", "--", "true"}, "cannot be negative"},
		{[]string{"--"}, "no command to run"},
		{nil, "no command to run"},
	} {
		if _, _, err := Parse(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q): %v, want an error containing %q", c.args, err, c.want)
		}
	}
}
