//go:build linux

package execstage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// The control channel carries what the stage makes inside the jail, where
// only it can make it, back to the supervisor before the agent exists: a
// socket listening in the jail's network namespace (KindListener), a
// terminal's master (KindPTY). It is one end of a SOCK_SEQPACKET
// socketpair (Pair), so that descriptors travel as SCM_RIGHTS and one
// sendmsg is one message: a JSON object of at most MaxMessage bytes, with
// at most MaxFiles descriptors. The stage's end is close-on-exec: EOF on
// the supervisor's end means the stage has exec'd the agent or died.

// The kinds of message.
const (
	KindListener = "listener" // Addr; one descriptor, a listening TCP socket
	KindPTY      = "pty"      // PID, PGID; one descriptor, the master
	// KindAnswer is the supervisor's answer to a message that asks for
	// one (Await), sent once the message has been handled (Answer).
	KindAnswer = "answer"
)

// MaxMessage and MaxFiles bound one message.
const (
	MaxMessage = 4096
	MaxFiles   = 4
)

// Message is one message on the control channel.
type Message struct {
	Kind string `json:"kind"`
	// Addr (KindListener) is the address the socket listens on, as
	// getsockname(2) says it ("127.0.0.1:3128", "[::1]:3128").
	Addr string `json:"addr,omitempty"`
	// PID and PGID (KindPTY) are the agent's, as the jail's pid namespace
	// names them.
	PID  int `json:"pid,omitempty"`
	PGID int `json:"pgid,omitempty"`
	// Await: the stage waits for the supervisor's answer before it goes
	// on, as it must where the supervisor acts on what it sent before the
	// agent runs (a pty's size, which the agent's first screen is drawn
	// at).
	Await bool `json:"await,omitempty"`
	// Sender is the sending process's pid as the reader's pid namespace
	// names it, from the kernel's SCM_CREDENTIALS (Pair asks for them); 0
	// when none came.
	Sender int `json:"-"`
}

// Pair makes a control channel: ours for ReadControl (non-blocking, so
// that reads honour deadlines, and asking the kernel for the sender's
// credentials), theirs for the stage (blocking).
func Pair() (ours, theirs *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("control channel: socketpair: %w", err)
	}
	if err := errors.Join(unix.SetNonblock(fds[0], true), unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1)); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("control channel: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control-stage"), nil
}

// SendControl sends m, with files (descriptors) attached, as one message.
func SendControl(fd int, m Message, files ...int) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(data) > MaxMessage || len(files) > MaxFiles {
		return fmt.Errorf("control message %s: %d bytes, %d descriptors: more than %d, %d", m.Kind, len(data), len(files), MaxMessage, MaxFiles)
	}
	var oob []byte
	if len(files) > 0 {
		oob = unix.UnixRights(files...)
	}
	for {
		err = unix.Sendmsg(fd, data, oob, nil, 0)
		if err != unix.EINTR {
			return err
		}
	}
}

// ReadControl reads one message and the descriptors it carries (opened
// close-on-exec). At the end of the channel it returns io.EOF; a message
// that does not fit is ErrBadMessage, its descriptors closed, and the
// next one can be read.
func ReadControl(c *os.File) (Message, []*os.File, error) {
	var m Message
	rc, err := c.SyscallConn()
	if err != nil {
		return m, nil, err
	}
	buf := make([]byte, MaxMessage)
	oob := make([]byte, unix.CmsgSpace(MaxFiles*4)+unix.CmsgSpace(unix.SizeofUcred))
	var n, oobn, flags int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, flags, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return m, nil, fmt.Errorf("control channel: %w", err)
	}
	if n == 0 && oobn == 0 {
		return m, nil, io.EOF
	}
	var files []*os.File
	cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	for _, cm := range cmsgs {
		if cm.Header.Level != unix.SOL_SOCKET {
			continue
		}
		switch cm.Header.Type {
		case unix.SCM_RIGHTS:
			fds, _ := unix.ParseUnixRights(&cm)
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "control"))
			}
		case unix.SCM_CREDENTIALS:
			if cred, err := unix.ParseUnixCredentials(&cm); err == nil {
				m.Sender = int(cred.Pid)
			}
		}
	}
	switch {
	case err != nil:
	case flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
		err = fmt.Errorf("longer than %d bytes or %d descriptors", MaxMessage, MaxFiles)
	default:
		err = json.Unmarshal(buf[:n], &m)
	}
	if err != nil {
		for _, f := range files {
			f.Close()
		}
		return m, nil, fmt.Errorf("control channel: %w: %w", ErrBadMessage, err)
	}
	return m, files, nil
}

// answer is the one message the supervisor sends.
var answer = []byte(`{"kind":"` + KindAnswer + `"}`)

// Answer tells the stage that the message it awaits an answer to has been
// handled: it sends KindAnswer, never blocking.
func Answer(c *os.File) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		serr = unix.Sendmsg(int(fd), answer, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
	})
	return errors.Join(err, serr)
}

// awaitAnswer waits for the supervisor's answer on the stage's end.
func awaitAnswer(fd int) error {
	buf := make([]byte, MaxMessage)
	for {
		n, err := unix.Read(fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("wait for the supervisor's answer: %w", err)
		case n == 0:
			return errors.New("wait for the supervisor's answer: the supervisor closed the control channel")
		}
		var m Message
		if json.Unmarshal(buf[:n], &m) != nil || m.Kind != KindAnswer {
			return fmt.Errorf("wait for the supervisor's answer: got %q", buf[:n])
		}
		return nil
	}
}
