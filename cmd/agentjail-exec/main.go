// Command agentjail-exec is the jail's exec stage (package execstage): a
// small static binary bwrap runs inside the jail, which applies the rlimits,
// closes inherited descriptors, execs the agent and reports how that went.
// agentjail binds it into every jail; it is not meant to be run by hand.
package main

import (
	"os"

	"github.com/agentjail/agentjail/execstage"
)

func main() { os.Exit(execstage.Main(os.Args[1:])) }
