// Package term keeps the operator's terminal as agentjail found it and
// gives an interactive run a terminal of its own to draw on.
//
// Save takes a terminal's modes and line discipline before a run, MakeRaw
// makes it raw for a run on a pty (the agent's line discipline does the
// work), Inherit hands the pty the terminal's size and control
// characters, and Restore puts the saved modes back once the jail has
// ended. Filter passes the jail's output to the terminal without the
// control strings that would act on the operator's machine (a clipboard
// write, a file transfer) and notes what it must reset afterwards
// (Filter.Reset, ScreenReset); ResetFirst resets the character
// attributes before agentjail's own first message. Escapes finds the
// operator's escape sequences (~.) in what they type.
//
// It must not read from the terminal itself, and writes to it only what
// the caller hands a Filter or writes from Reset: nothing that moves the
// cursor or clears what the agent printed.
package term
