package record

import "strings"

// Redact replaces every secret in s by "[redacted]". Values shorter than
// MinSecret bytes are not looked for: they would match ordinary text.
func Redact(s string, secrets []string) string {
	s, _, _ = RedactExcerpt(s, "", 0, secrets)
	return s
}

// MinSecret is the length below which an environment value is not
// redacted (docs/supervision.md, the run record).
const MinSecret = 6

// RedactExcerpt redacts head and tail, the kept ends of one text of which
// omitted bytes between them were left out (tail may be empty: only a head
// kept), and returns them with the count of bytes left out now. Every
// secret in either is masked; so is one that straddles them when nothing
// was left out. Where bytes were left out, a secret they cut would show in
// part: the head and the tail each give up as many bytes at the cut as the
// longest secret has but one, which join the left-out ones, whatever they
// hold. Masking only the parts that matched a secret told a later run,
// which could read the record, whether its guess at the secret's first
// bytes was right, one guess a stream at a time. Each maximal masked run
// becomes one "[redacted]".
func RedactExcerpt(head, tail string, omitted int64, secrets []string) (string, string, int64) {
	if omitted > 0 {
		longest := 0
		for _, v := range secrets {
			if len(v) >= MinSecret {
				longest = max(longest, len(v))
			}
		}
		if cut := longest - 1; cut > 0 {
			h, t := min(cut, len(head)), min(cut, len(tail))
			head, tail, omitted = head[:len(head)-h], tail[t:], omitted+int64(h+t)
		}
	}
	text := head + tail
	var masked []bool // lazily: most excerpts hold no secret
	for _, v := range secrets {
		if len(v) < MinSecret {
			continue
		}
		for i := 0; ; i++ {
			j := strings.Index(text[i:], v)
			if j < 0 {
				break
			}
			i += j
			if masked == nil {
				masked = make([]bool, len(text))
			}
			for k := i; k < i+len(v); k++ {
				masked[k] = true
			}
		}
	}
	if masked == nil {
		return head, tail, omitted
	}
	return masking(head, masked[:len(head)]), masking(tail, masked[len(head):]), omitted
}

// masking replaces each run of masked bytes of s by "[redacted]".
func masking(s string, masked []bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if !masked[i] {
			b.WriteByte(s[i])
			continue
		}
		b.WriteString("[redacted]")
		for i+1 < len(s) && masked[i+1] {
			i++
		}
	}
	return b.String()
}

// ExcerptOf renders one stream's excerpt for the record: redacted first,
// on the bytes as written, then made valid UTF-8.
func ExcerptOf(head, tail []byte, omitted int64, secrets []string) Excerpt {
	h, t, omitted := RedactExcerpt(string(head), string(tail), omitted, secrets)
	return Excerpt{
		Head:         strings.ToValidUTF8(h, "\uFFFD"),
		Tail:         strings.ToValidUTF8(t, "\uFFFD"),
		OmittedBytes: omitted,
	}
}
