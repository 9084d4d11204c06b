package procs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestProcCovers reads mountinfo tables of the places agentjail runs in and
// says whether the jail can mount a fresh /proc there (see the container
// table of docs/nesting.md, What was measured).
func TestProcCovers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file string
		want []string
	}{
		{"host", nil},
		// systemd's binfmt_misc automount covers a permanently empty
		// directory, which the kernel allows.
		{"systemd-binfmt", nil},
		// docker run --security-opt systempaths=unconfined.
		{"docker-unconfined", nil},
		{"docker-default", []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/scsi"}},
		// unshare -mpf --mount-proc, then /dev/null over /proc/timer_list:
		// the older /proc underneath is covered by the new one.
		{"masked-timer-list", []string{"/proc/timer_list"}},
		// One fully visible procfs anywhere is enough.
		{"second-visible-proc", nil},
		{"ro-proc", []string{"/proc (read-only)"}},
		{"no-proc", []string{"/proc (no procfs mounted)"}},
	} {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			f, err := os.Open(filepath.Join("testdata/mountinfo", c.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			table, err := ParseMountinfo(f)
			if err != nil {
				t.Fatal(err)
			}
			if got := ProcCovers(table); !slices.Equal(got, c.want) {
				t.Errorf("ProcCovers = %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestParseMountinfo(t *testing.T) {
	t.Parallel()
	table, err := ParseMountinfo(strings.NewReader("91 21 0:48 /a\\134b /home/op/My\\040Files rw,relatime shared:50 master:2 - ext4 /dev/sdb1 rw\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Mount{ID: 91, Parent: 21, Root: `/a\b`, Point: "/home/op/My Files", Options: []string{"rw", "relatime"}, FSType: "ext4"}
	if len(table) != 1 || table[0].Point != want.Point || table[0].Root != want.Root || table[0].ID != 91 || table[0].Parent != 21 ||
		!slices.Equal(table[0].Options, want.Options) || table[0].FSType != "ext4" || !slices.Equal(table[0].Super, []string{"rw"}) {
		t.Errorf("ParseMountinfo = %+v\nwant %+v", table, want)
	}
	// The source and super options may be missing; nothing else may.
	if _, err := ParseMountinfo(strings.NewReader("22 21 0:20 / /proc rw,relatime - proc\n")); err != nil {
		t.Errorf("a line without source: %v", err)
	}
	for _, bad := range []string{
		"22 21 0:20 / /proc rw\n",               // no separator
		"x 21 0:20 / /proc rw - proc proc rw\n", // id
		"22 21 0:20 / /proc rw -\n",             // no fstype
		"22 21 0:20 / - proc proc rw\n",         // too few fields before it
	} {
		if _, err := ParseMountinfo(strings.NewReader(bad)); !errors.Is(err, ErrMountinfo) {
			t.Errorf("ParseMountinfo(%q) = %v, want ErrMountinfo", bad, err)
		}
	}
}
