package broker

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// An API route's answers are read for the credentials the route adds: an
// upstream that echoes what it was sent (a debugging endpoint, a gateway's
// error page) would otherwise hand the jail what its placeholder stands
// for. Each credential found is overwritten with a mask of its own length,
// in the headers (of 1xx answers, of the answer, in its trailers) and in
// the body, whose length then stays what the upstream said. The body is
// asked for in gzip, which the transport takes off (the jail gets it
// plain); another coding the upstream chose anyway could hide a
// credential, and the answer is refused (errCoded).

// redactor overwrites credentials with masks.
type redactor struct {
	secrets, masks [][]byte // longest first, so that one inside another is masked whole
}

// newRedactor is a redactor of secrets, nil for none.
func newRedactor(secrets []string) *redactor {
	var vals []string
	for _, v := range secrets {
		if v != "" && !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return nil
	}
	slices.SortFunc(vals, func(a, b string) int { return len(b) - len(a) })
	r := &redactor{}
	for _, v := range vals {
		r.secrets = append(r.secrets, []byte(v))
		r.masks = append(r.masks, maskOf(len(v)))
	}
	return r
}

// maskOf is what stands for a credential of n bytes.
func maskOf(n int) []byte {
	const word = "agentjail-redacted-"
	if n < len(word)+4 {
		return bytes.Repeat([]byte("x"), n)
	}
	return append([]byte(word), bytes.Repeat([]byte("x"), n-len(word))...)
}

// mask overwrites, in place, every credential b holds from its start,
// and returns how far b is done: what follows may begin a credential that
// more bytes would end, unless b ends there (end). A credential that
// begins another (a key and a longer one) waits for the longer's end.
func (r *redactor) mask(b []byte, end bool) int {
	for i := 0; i < len(b); i++ {
		full := -1
		for k, s := range r.secrets {
			if b[i] != s[0] {
				continue
			}
			switch {
			case bytes.HasPrefix(b[i:], s):
				if full < 0 {
					full = k // the longest: the secrets are longest first
				}
			case !end && bytes.HasPrefix(s, b[i:]):
				return i // a longer one may be on its way
			}
		}
		if full >= 0 {
			copy(b[i:], r.masks[full])
			i += len(r.secrets[full]) - 1
		}
	}
	return len(b)
}

func (r *redactor) string(s string) string {
	for _, c := range r.secrets {
		if strings.Contains(s, string(c)) {
			b := []byte(s)
			r.mask(b, true)
			return string(b)
		}
	}
	return s
}

// header masks the credentials in h's names and values, whatever their
// case: net/http canonicalizes the names it reads, and a value may list
// names.
func (r *redactor) header(h http.Header) {
	for k, vv := range h {
		for i, v := range vv {
			vv[i] = r.fold(r.string(v)) // names listed in a value too (Trailer, Vary)
		}
		if clean := r.fold(k); clean != k {
			delete(h, k)
			h[clean] = append(h[clean], vv...)
		}
	}
}

// fold is k with the credentials in it masked, matched whatever their
// case (where lowering keeps k's length: ASCII, as a header's name is).
func (r *redactor) fold(k string) string {
	lower := []byte(strings.ToLower(k))
	var masked []byte
	for i, s := range r.secrets {
		ls := bytes.ToLower(s)
		for at := 0; len(lower) == len(k); {
			j := bytes.Index(lower[at:], ls)
			if j < 0 {
				break
			}
			if masked == nil {
				masked = []byte(k)
			}
			copy(masked[at+j:], r.masks[i])
			copy(lower[at+j:], r.masks[i])
			at += j + len(s)
		}
	}
	if masked == nil {
		return k
	}
	return string(masked)
}

// redactedBody is an answer's body with its credentials masked. Bytes
// that may begin one are held until the next read says, or the end; an
// event stream's events end in a newline, which begins none, so they are
// not held.
type redactedBody struct {
	io.ReadCloser
	r       *redactor
	buf     []byte // read and masked
	out     int    // buf[:out] may be returned; buf[out:] is held
	err     error  // the body's end, or its failure
	scratch []byte
}

func (b *redactedBody) Read(p []byte) (int, error) {
	for b.out == 0 {
		if b.err != nil {
			return 0, b.err
		}
		if b.scratch == nil {
			b.scratch = make([]byte, 32<<10)
		}
		n, err := b.ReadCloser.Read(b.scratch)
		b.buf = append(b.buf, b.scratch[:n]...)
		b.err, b.out = err, b.r.mask(b.buf, err != nil)
	}
	n := copy(p, b.buf[:b.out])
	b.buf, b.out = b.buf[n:], b.out-n
	return n, nil
}

// redactedWriter masks the credentials in the headers written through
// it: an answer's, and each 1xx answer's the reverse proxy relays. The
// trailers are the caller's to mask, once the reverse proxy is done.
type redactedWriter struct {
	http.ResponseWriter
	r    *redactor
	sent bool // the answer's headers
}

func (w *redactedWriter) WriteHeader(code int) {
	if !w.sent {
		w.r.header(w.Header())
	}
	w.sent = code >= 200
	w.ResponseWriter.WriteHeader(code)
}

func (w *redactedWriter) Write(p []byte) (int, error) {
	if !w.sent { // an implicit 200
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap gives http.ResponseController the writer below (flushes).
func (w *redactedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// readable makes an API answer's body one to read plain: a body in gzip,
// which the route asks for, is taken off here; an answer in any other
// coding, or in several (gzip twice: the transport's own decoding took
// off one, and named none), could carry a credential unread and is
// refused, and so is a switch to another protocol (not asked for either:
// the route takes no upgrade).
func readable(resp *http.Response) error {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return unreadable("the upstream switched protocols, which an API route does not relay: agentjail reads each answer for the credential it adds")
	}
	var codings []string
	for _, v := range resp.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	bodiless := resp.Request.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent ||
		resp.StatusCode == http.StatusNotModified || resp.ContentLength == 0
	switch {
	case len(codings) == 0 || bodiless && len(codings) == 1 && codings[0] == "gzip":
		return nil
	case len(codings) > 1 || codings[0] != "gzip":
		return unreadable(fmt.Sprintf("the upstream answered in Content-Encoding %q, which agentjail does not read: it asks for gzip, and reads each answer for the credential it adds", strings.Join(codings, ", ")))
	}
	z, err := gzip.NewReader(resp.Body)
	if err != nil {
		return unreadable(fmt.Sprintf("the upstream's gzip answer does not begin as gzip: %v", err))
	}
	resp.Body = gzipBody{z, resp.Body}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return nil
}

// gzipBody is a body read through gzip, closed with the body below.
type gzipBody struct {
	*gzip.Reader
	body io.ReadCloser
}

func (g gzipBody) Close() error { return g.body.Close() }

// unreadable is an API answer readable refused.
type unreadable string

func (u unreadable) Error() string { return string(u) }
