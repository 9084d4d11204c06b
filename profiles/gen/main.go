// Command gen writes profiles/compiled.go, the built-in profiles loaded and
// merged at build time (run by `go generate ./profiles`).
package main

import (
	"fmt"
	"os"

	"github.com/agentjail/agentjail/profiles/internal/gosrc"
)

func main() {
	src, err := gosrc.Source()
	if err == nil {
		err = os.WriteFile("compiled.go", src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
