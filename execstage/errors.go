package execstage

import "errors"

// ErrBadMessage is a control message the reader refused (too long, too
// many descriptors, not JSON); the channel stays usable.
var ErrBadMessage = errors.New("bad control message")
