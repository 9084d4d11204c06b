package launcher

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The protocol agentjail-run (cmd/agentjail-run/client.c) speaks with a
// worker, over a SOCK_STREAM Unix socket:
//
//	client → worker  one sendmsg: Magic and the body's length (uint32,
//	                 little-endian), with SCM_RIGHTS: the client's fds 0, 1
//	                 and 2 and its working directory (O_PATH); then the
//	                 body: NUL-terminated fields
//	                     umask (octal)
//	                     N, then N limits "RESOURCE:CUR:MAX" (decimal, or inf)
//	                     argc, then argc arguments (what follows agentjail-run)
//	                     envc, then envc "NAME=VALUE"
//	client → worker  then, until the end: one byte per signal the client
//	                 received, its number; the end of the stream is the
//	                 client gone
//	worker → client  one byte: Taken once the request is read and its run
//	                 begins, then one byte, the run's exit code, once the
//	                 run has ended; or Refused and one line saying why,
//	                 and the end of the stream (the client exits 125)
//
// A stream that ends before Taken is a request no run took (the launcher
// stopped with the client still queued, or a worker ended while reading
// it): the client runs `agentjail run` itself, as where no launcher
// listens. One that ends after Taken and before the exit code is a run
// whose end is unknown: never run twice.
const (
	Magic = "AJL2"
	// magicBefore is the release before Taken and Refused: its client
	// reads any first byte as the exit code.
	magicBefore = "AJL1"
	Taken       = 'T'
	Refused     = 'R'
	MaxBody     = 16 << 20
	// headLen is Magic and the body's length.
	headLen = len(Magic) + 4
	// Files is how many descriptors come with the head: stdin, stdout,
	// stderr and the working directory.
	Files = 4
)

// Request is what a client asks a worker for.
type Request struct {
	Umask  uint32
	Limits []Limit
	Args   []string // after agentjail-run: `agentjail run` ARGS
	Env    []string
}

// Limit is one of the client's resource limits.
type Limit struct {
	Resource int
	Cur, Max uint64 // math.MaxUint64: unlimited
}

// bodyLen reads the head: the body's length.
func bodyLen(head []byte) (int, error) {
	if len(head) != headLen || string(head[:len(Magic)]) != Magic {
		return 0, fmt.Errorf("not a request of agentjail-run (%q): is agentjail-run from the same release as agentjail?", head)
	}
	n := binary.LittleEndian.Uint32(head[len(Magic):])
	if n > MaxBody {
		return 0, fmt.Errorf("a request of %d bytes, more than %d", n, MaxBody)
	}
	return int(n), nil
}

// parseBody reads a request's body.
func parseBody(body []byte) (Request, error) {
	if len(body) == 0 || body[len(body)-1] != 0 {
		return Request{}, errors.New("a request whose last field is not ended")
	}
	f := fields{rest: bytes.Split(body[:len(body)-1], []byte{0})}
	var r Request
	mask, err := strconv.ParseUint(f.next(), 8, 32)
	if err != nil || mask > 0o777 {
		return Request{}, fmt.Errorf("a request's umask: %q", f.last)
	}
	r.Umask = uint32(mask)
	n, err := f.count()
	if err != nil {
		return Request{}, err
	}
	for range n {
		l, err := parseLimit(f.next())
		if err != nil {
			return Request{}, err
		}
		r.Limits = append(r.Limits, l)
	}
	if r.Args, err = f.list(); err != nil {
		return Request{}, err
	}
	if r.Env, err = f.list(); err != nil {
		return Request{}, err
	}
	if len(f.rest) != 0 {
		return Request{}, fmt.Errorf("a request with %d fields too many", len(f.rest))
	}
	return r, nil
}

// fields are a body's fields, read in order.
type fields struct {
	rest [][]byte
	last string
}

func (f *fields) next() string {
	f.last = "(missing)"
	if len(f.rest) > 0 {
		f.last, f.rest = string(f.rest[0]), f.rest[1:]
	}
	return f.last
}

// count reads a field that counts those after it.
func (f *fields) count() (int, error) {
	n, err := strconv.Atoi(f.next())
	if err != nil || n < 0 || n > len(f.rest) {
		return 0, fmt.Errorf("a request's count of fields: %q", f.last)
	}
	return n, nil
}

// list reads a count and as many fields.
func (f *fields) list() ([]string, error) {
	n, err := f.count()
	if err != nil {
		return nil, err
	}
	l := make([]string, n)
	for i := range l {
		l[i] = f.next()
	}
	return l, nil
}

func parseLimit(s string) (Limit, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Limit{}, fmt.Errorf("a request's resource limit: %q", s)
	}
	res, err := strconv.Atoi(parts[0])
	if err != nil || res < 0 || res > 63 {
		return Limit{}, fmt.Errorf("a request's resource limit: %q", s)
	}
	var v [2]uint64
	for i, p := range parts[1:] {
		if p == "inf" {
			v[i] = math.MaxUint64
		} else if v[i], err = strconv.ParseUint(p, 10, 64); err != nil {
			return Limit{}, fmt.Errorf("a request's resource limit: %q", s)
		}
	}
	return Limit{Resource: res, Cur: v[0], Max: v[1]}, nil
}
