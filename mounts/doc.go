// Package mounts turns a validated, expanded policy into the ordered
// bubblewrap argument list of one jail: namespaces, the read-only base,
// tmpfs mounts, writable roots, re-protection of secrets under them, denied
// paths, and the exec stage that starts the agent.
//
// Render is pure. What it must know about the disk (which protected paths
// exist, where symlinks point, who owns what, what git reads configuration
// from in each repository under a writable root: git.go) it reads through
// an injected fs.ReadLinkFS rooted at the host's /, so tests use fake
// trees; files there are read as hostile input (regular files only,
// bounded, links resolved through the interface). Whether the
// jail can mount a fresh /proc is the caller's to say (launch reads the
// host's mount table with procs.ParseMountinfo and procs.ProcCovers).
// TakeSnapshot records, through the same interface and by the same search,
// the protected paths under the writable roots, so that what a run made
// where no bind could reach is found afterwards. It must not start
// processes, change files, or read the environment.
package mounts
