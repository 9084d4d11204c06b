// Package term keeps the operator's terminal as agentjail found it: Save
// takes a terminal's modes and line discipline before a run, Restore puts
// them back once the jail has ended (the agent may have turned echo off or
// left it raw), and ResetFirst resets the character attributes before
// agentjail's own first message (an agent may end its output with
// "\e[8m", which would hide everything after it).
//
// It must not read from or write to the terminal beyond that: it never
// takes input, never changes the size, and resets nothing that would move
// the cursor or clear what the agent printed.
package term
