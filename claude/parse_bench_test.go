package claude

import (
	"strings"
	"testing"
)

// BenchmarkParserStreamJSON: the parser's own cost on stream-json's
// assistant events (1 KiB lines, as BenchmarkClaudeOutputThroughput in
// test/bench replays) fed in reads of about 1 MiB, as the supervisor's stream does.
func BenchmarkParserStreamJSON(b *testing.B) {
	line := `{"type":"assistant","message":{"content":[{"type":"text","text":"` + strings.Repeat("x", 900) + `"}]},"session_id":"00000000-0000-0000-0000-000000000000"}` + "\n"
	chunk := []byte(strings.Repeat(line, (1<<20)/len(line)))
	p := NewParser(FormatStreamJSON)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		p.Write(chunk)
	}
}
