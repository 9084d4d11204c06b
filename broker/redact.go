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
// asked for in gzip, which readable takes off (the jail gets it plain);
// another coding the upstream chose anyway could hide a credential, and
// the answer is refused (unreadable).

// redactor overwrites credentials with masks, and what shows of one in
// part: an echo that cuts what it quotes (an error page's first 120
// bytes) let the jail choose where the cut falls in the credential, and
// so read all of it but a byte. Every run of at least fragment(s) bytes
// that s holds is masked too.
type redactor struct {
	secrets, masks [][]byte // longest first, so that one inside another is masked whole
	lowSecrets     [][]byte // secrets in lower case (fold)
	// frags are the secrets' fragments by their length, as they are and
	// in lower case (fold); longest is the longest fragment length.
	frags, lowFrags map[int]map[string]bool
	longest         int
}

// fragment is how long a run of s must be to be masked as part of it: a
// key's first 16 bytes are mostly its public prefix (sk-ant-api03-), a
// short secret's quarter says little.
func fragment(s []byte) int { return min(16, max(4, len(s)/4), len(s)) }

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
	r := &redactor{frags: map[int]map[string]bool{}, lowFrags: map[int]map[string]bool{}}
	for _, v := range vals {
		r.secrets = append(r.secrets, []byte(v))
		r.lowSecrets = append(r.lowSecrets, []byte(strings.ToLower(v)))
		r.masks = append(r.masks, maskOf(len(v)))
		n := fragment([]byte(v))
		r.longest = max(r.longest, n)
		for _, m := range []struct {
			frags map[int]map[string]bool
			v     string
		}{{r.frags, v}, {r.lowFrags, strings.ToLower(v)}} {
			if m.frags[n] == nil {
				m.frags[n] = map[string]bool{}
			}
			for i := 0; i+n <= len(m.v); i++ {
				m.frags[n][m.v[i:i+n]] = true
			}
		}
	}
	return r
}

// fragments writes x into out, a copy of orig, over every run of seen
// (orig, or a lower-case copy of it) that is a fragment of a secret in
// frags, where no whole one's mask is written already.
func (r *redactor) fragments(out, orig, seen []byte, frags map[int]map[string]bool) {
	for n, set := range frags {
		for i := 0; i+n <= len(seen); i++ {
			if set[string(seen[i:i+n])] {
				for k := i; k < i+n; k++ {
					if out[k] == orig[k] {
						out[k] = 'x'
					}
				}
			}
		}
	}
}

// heldBack is how many of b's last bytes may begin a fragment that the
// next read would end: a run shorter than the longest fragment that a
// secret holds. An event stream's events end in a newline, which none
// holds.
func (r *redactor) heldBack(b []byte) int {
	for k := min(len(b), r.longest-1); k > 0; k-- {
		if slices.ContainsFunc(r.secrets, func(s []byte) bool { return bytes.Contains(s, b[len(b)-k:]) }) {
			return k
		}
	}
	return 0
}

// maskOf is what stands for a credential of n bytes.
func maskOf(n int) []byte {
	const word = "agentjail-redacted-"
	if n < len(word)+4 {
		return bytes.Repeat([]byte("x"), n)
	}
	return append([]byte(word), bytes.Repeat([]byte("x"), n-len(word))...)
}

// hide writes into out, a copy of raw, a mask over every credential raw
// holds, whole, and x over every fragment of one.
func (r *redactor) hide(raw, out []byte) { r.cover(out, raw, raw, r.secrets, r.frags) }

// cover writes into out, a copy of orig, a mask over every secret (of
// secrets) seen holds whole, seen being orig or a lower-case copy of it,
// and x over every fragment of one (of frags).
func (r *redactor) cover(out, orig, seen []byte, secrets [][]byte, frags map[int]map[string]bool) {
	for i := 0; i < len(seen); i++ {
		for k, s := range secrets { // the longest first
			if bytes.HasPrefix(seen[i:], s) {
				copy(out[i:], r.masks[k])
				i += len(s) - 1
				break
			}
		}
	}
	r.fragments(out, orig, seen, frags)
}

func (r *redactor) string(s string) string {
	out := []byte(s)
	r.hide([]byte(s), out)
	return string(out)
}

// fold is k with the credentials in it masked, whole or in part, matched
// whatever their case (where lowering keeps k's length: ASCII, as a
// header's name is; else as string does).
func (r *redactor) fold(k string) string {
	lower := []byte(strings.ToLower(k))
	if len(lower) != len(k) {
		return r.string(k)
	}
	out := []byte(k)
	r.cover(out, []byte(k), lower, r.lowSecrets, r.lowFrags)
	return string(out)
}

// header masks the credentials in h's names and values, whatever their
// case: net/http canonicalizes the names it reads, and a value may list
// names.
func (r *redactor) header(h http.Header) {
	for k, vv := range h {
		for i, v := range vv {
			vv[i] = r.fold(v) // names listed in a value too (Trailer, Vary)
		}
		if clean := r.fold(k); clean != k {
			delete(h, k)
			h[clean] = append(h[clean], vv...)
		}
	}
}

// redactedBody is an answer's body with its credentials masked. Bytes
// that may begin one, or a fragment of one, are held until the next read
// says, or the end; an event stream's events end in a newline, which
// begins none, so they are not held.
type redactedBody struct {
	io.ReadCloser
	r        *redactor
	raw, out []byte // read (held from last time first), and as it goes out
	ready    []byte // masked, not yet returned
	err      error  // the body's end, or its failure
	scratch  []byte
}

func (b *redactedBody) Read(p []byte) (int, error) {
	for len(b.ready) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		if b.scratch == nil {
			b.scratch = make([]byte, 32<<10)
		}
		n, err := b.ReadCloser.Read(b.scratch)
		b.raw = append(b.raw, b.scratch[:n]...)
		b.out = append(b.out, b.scratch[:n]...)
		b.r.hide(b.raw, b.out)
		done := len(b.raw)
		if b.err = err; err == nil {
			done -= b.r.heldBack(b.raw)
		}
		b.ready = append(b.ready[:0], b.out[:done]...)
		b.raw = append(b.raw[:0], b.raw[done:]...)
		b.out = append(b.out[:0], b.out[done:]...)
	}
	n := copy(p, b.ready)
	b.ready = b.ready[n:]
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
		return unreadable(fmt.Sprintf("the upstream answered in Content-Encoding %q, which agentjail does not read: it asks for gzip, and reads each answer for the credential it adds", strings.Join(resp.Header.Values("Content-Encoding"), ", ")))
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
