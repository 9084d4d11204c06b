package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/record"
)

// What run writes for the operator (--record, --log, --results) may lie
// in a writable root, where the agent could have planted links and files.
// Each is reached through hostfs before the agent starts, and held by
// descriptor until the run is over: a link below a writable root is never
// followed, and what the agent does to the paths during the run cannot
// redirect what agentjail writes.

// recordFile is where --record goes: the directory that holds the record,
// opened before the run, and the record's name in it.
type recordFile struct {
	path string // as given, "" for none
	// walker reaches the directory: hostfs.Strict until the policy has
	// said which the writable roots are.
	walker hostfs.Walker
	dir    *hostfs.Dir
	name   string
}

// open opens the record's directory and checks, before anything runs, that
// the record can be written there: a directory agentjail can create files
// in, reached without a link in a writable root, and no directory at the
// record's own path.
func (r *recordFile) open() error {
	if r.path == "" || r.dir != nil {
		return nil
	}
	d, name, err := r.walker.Parent(r.path)
	if errors.Is(err, hostfs.ErrLink) && slices.Equal(r.walker.Roots, hostfs.Strict.Roots) {
		return fmt.Errorf("--record %s: a symbolic link on the path, which agentjail follows nowhere until the profile names the writable roots; give the path without links", r.path)
	}
	if err != nil {
		return outputError("--record", r.path, err, "choose a writable directory")
	}
	if st, err := d.Lstat(name); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		d.Close()
		return outputError("--record", r.path, fmt.Errorf("%s is a directory", filepath.Join(d.Path, name)), "name a file, such as "+filepath.Join(r.path, "run.json"))
	}
	if err := d.CheckWritable(); err != nil {
		d.Close()
		return outputError("--record", r.path, err, "choose a writable directory")
	}
	r.dir, r.name = d, name
	return nil
}

// write writes rec, opening the directory first if it is not open yet,
// atomically (hostfs.Dir.Replace): a reader sees either no record or a
// whole one, and whatever was at the name (a link, a file the agent put
// there) is replaced, never followed.
func (r *recordFile) write(rec *record.Record) error {
	if err := r.open(); err != nil {
		return err
	}
	data, err := rec.Marshal()
	if err == nil {
		err = r.dir.Replace(r.name, data)
	}
	if err != nil {
		return fmt.Errorf("write the run record %s: %w", filepath.Join(r.dir.Path, r.name), err)
	}
	return nil
}

func (r *recordFile) close() { r.dir.Close() }

// openLog opens --log p for appending, before anything runs; nil for none.
// In a writable root an existing log must be a plain file of agentjail's
// user's own (hostfs.Dir.OpenAppend): a link planted by an earlier run is
// refused, never appended through.
func openLog(w hostfs.Walker, p string) (*os.File, error) {
	if p == "" {
		return nil, nil
	}
	d, name, err := w.Parent(p)
	if err != nil {
		return nil, outputError("--log", p, err, "choose a writable file")
	}
	defer d.Close()
	f, err := d.OpenAppend(name, os.Geteuid())
	if err != nil {
		return nil, outputError("--log", p, err, "choose a writable file")
	}
	return f, nil
}

// openResults opens --results p, creating it (0700) when missing, and
// checks that agentjail can create files in it, before anything runs; nil
// for none.
func openResults(w hostfs.Walker, p string) (*hostfs.Dir, error) {
	if p == "" {
		return nil, nil
	}
	d, err := w.MkdirAll(p, 0o700)
	if err == nil {
		if err = d.CheckWritable(); err != nil {
			d.Close()
		}
	}
	if err != nil {
		return nil, outputError("--results", p, err, "choose a directory agentjail can create or write")
	}
	return d, nil
}

// outputError is the one-line message for an output that cannot be used:
// the flag and path, what is wrong, and the fix.
func outputError(flag, p string, err error, fix string) error {
	var pe *fs.PathError
	switch {
	case errors.Is(err, hostfs.ErrLink):
		fix = "remove the link, or choose a path outside the writable roots"
	case errors.Is(err, hostfs.ErrForeignLink):
		fix = "give the path without the link, or remove the link"
	case errors.Is(err, hostfs.ErrNotOwn):
		fix = "remove it (agentjail creates the file itself), or choose another path"
	case flag == "--record" && errors.As(err, &pe):
		dir := pe.Path
		if filepath.Clean(dir) == filepath.Clean(p) {
			dir = filepath.Dir(p) // the error is the file's: its directory is what refuses
		}
		err = fmt.Errorf("cannot create a file in %s: %w", dir, pe.Err)
	case flag == "--log" && errors.As(err, &pe):
		return fmt.Errorf("--log: open %s: %w; %s", p, pe.Err, fix)
	}
	return fmt.Errorf("%s %s: %w; %s", flag, p, err, fix)
}
