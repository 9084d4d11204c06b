// Package record is the run record (`--record FILE`): its versioned
// schema, the reasons a run ends with and agentjail's own exit codes, and
// the redaction of the jail's environment values from what it keeps of
// the output. It is pure data: the supervisor and the run's owner fill a
// Record, and the owner writes it (Marshal) where the operator asked.
//
// It must not import any other package of agentjail's: everything that
// reports on a run (supervise, claude, the live registry) imports it.
package record
