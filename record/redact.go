package record

import "strings"

// Redact replaces every secret in s by "[redacted]". Values shorter than
// MinSecret bytes are not looked for: they would match ordinary text.
func Redact(s string, secrets []string) string {
	s, _ = RedactExcerpt(s, "", 0, secrets)
	return s
}

// MinSecret is the length below which an environment value is not
// redacted (docs/supervision.md, the run record).
const MinSecret = 6

// minShown is how much of a secret cut by the omitted bytes must show for
// it to be masked: fewer bytes reveal less than a value too short to be
// looked for at all, and are too common at a cut to mask without
// mangling ordinary text.
const minShown = MinSecret / 2

// RedactExcerpt redacts head and tail, the kept ends of one text of which
// omitted bytes between them were left out (tail may be empty: only a head
// kept). Every secret in either is masked; so is one that straddles them
// when nothing was left out. A secret the omitted bytes cut shows only in
// part, and is masked too: the end of the head that begins one, the start
// of the tail that ends one, when at least minShown bytes of it show.
// Each maximal masked run becomes one "[redacted]".
func RedactExcerpt(head, tail string, omitted int64, secrets []string) (string, string) {
	text := head + tail
	var masked []bool // lazily: most excerpts hold no secret
	mark := func(from, to int) {
		if masked == nil {
			masked = make([]bool, len(text))
		}
		for i := from; i < to; i++ {
			masked[i] = true
		}
	}
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
			mark(i, i+len(v))
		}
		if omitted == 0 {
			continue
		}
		// The longest end of head that begins v, and the longest start of
		// tail that ends it.
		for i := max(0, len(head)-len(v)+1); i < len(head); i++ {
			if strings.HasPrefix(v, head[i:]) {
				if len(head)-i >= minShown {
					mark(i, len(head))
				}
				break
			}
		}
		for k := min(len(tail), len(v)-1); k >= minShown; k-- {
			if strings.HasSuffix(v, tail[:k]) {
				mark(len(head), len(head)+k)
				break
			}
		}
	}
	if masked == nil {
		return head, tail
	}
	return masking(head, masked[:len(head)]), masking(tail, masked[len(head):])
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
	h, t := RedactExcerpt(string(head), string(tail), omitted, secrets)
	return Excerpt{
		Head:         strings.ToValidUTF8(h, "\uFFFD"),
		Tail:         strings.ToValidUTF8(t, "\uFFFD"),
		OmittedBytes: omitted,
	}
}
