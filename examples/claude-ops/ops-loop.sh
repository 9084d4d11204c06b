#!/bin/sh
# ops-loop.sh — the Claude Ops loop on agentjail.
#
# Every CLAUDEOPS_INTERVAL seconds, one cycle:
#   1. merge the baseline MCP config with each repository's
#      .claude-ops/mcp.json that was there when the loop started (a
#      shallow merge of mcpServers: a repository's server replaces the
#      baseline's of the same name; repositories in name order) into the
#      cycle's own mcp.json;
#   2. run tier 1 (observe) jailed by `agentjail run --profile tier1`, with
#      its timeouts; when it reports failure — a non-zero exit (an error, a
#      timeout) or a last STATUS line other than "healthy" — run tier 2
#      (safe remediation) in its own profile, and when that does not report
#      "resolved", tier 3 (full remediation);
#   3. keep one log and one run record per run, and the session
#      transcripts, under CLAUDEOPS_RESULTS_DIR/<cycle>/; each tier's
#      sessions stay resumable in a directory of the tier's own
#      (agentjail --claude-dir CLAUDEOPS_SESSIONS_DIR/tierN): no tier reads
#      another's, and only the sessions persist, never a setting.
# Run it under `agentjail init` (the container's ENTRYPOINT), which reaps
# and ends whatever a cycle leaves behind:
#
#   agentjail init -- examples/claude-ops/ops-loop.sh
#
# What a run may write: CLAUDEOPS_STATE_DIR in every tier (the agent's own
# notes, e.g. cooldown.json), and in tiers 2 and 3 each repository, given to
# agentjail as a writable root of its own (--write REPOS/alpha --write
# REPOS/beta ...), never CLAUDEOPS_REPOS_DIR itself: no run can make a new
# repository, and each repository's .claude-ops is protected at the top of
# its root, read-only when it exists and uncreatable when it does not (the
# profiles re-protect it), so no run can plant an MCP server or a prompt that
# a later, more privileged tier would load. The cycle's mcp.json, logs and
# records live under CLAUDEOPS_RESULTS_DIR, which no run may write, and
# claude starts there, so no project settings or CLAUDE.md of an agent's
# making are read either.
#
# Two guards for what a jail could not prevent. First, the per-repo configs
# merged are only those there when the loop started, before any run: a
# .claude-ops/mcp.json that appears later, by whatever route, is ignored
# (and said so) until the operator restarts the loop. (The file, not its
# contents, is fixed at the start: a config there at the start is read-only
# to every run, and the operator's edits to it are taken at the next cycle.)
#
# Second, a run that broke the policy halts the loop: what the jail could not
# prevent, it can no longer trust. A run's record with reason "violation"
# (e.g. a protected path made deeper in a repository), or, with no readable
# record to say why, agentjail's exit 123 (a violation) or 125 (its own
# failure, which may have cost the record), means no further tier and no
# further cycle (the record decides when there is one: claude may exit
# with any code): the loop logs each violation's detail, writes them to
# CLAUDEOPS_RESULTS_DIR/HALTED and exits 3, and while that file exists it
# refuses to start (exit 3 again). The operator checks and removes what the
# run made (the details name it), then removes HALTED.
#
# A tier whose jail could not be set up (record reason "setup_failed": a
# writable root the run user cannot write, say) ran no agent: the cycle
# stops there, no more privileged tier is tried, and the agentjail message
# is logged. When the loop's last cycle (CLAUDEOPS_CYCLES) ended so, it
# exits 125.
#
# Environment (defaults in brackets):
#   CLAUDEOPS_INTERVAL      seconds between cycles [3600]
#   CLAUDEOPS_CYCLES        stop after this many cycles; 0: never [0]
#   CLAUDEOPS_REPOS_DIR     the repositories [/repos]
#   CLAUDEOPS_STATE_DIR     the agent's writable state [/state]
#   CLAUDEOPS_RESULTS_DIR   logs, records, transcripts, merged configs [/results]
#   CLAUDEOPS_SESSIONS_DIR  each tier's Claude Code sessions, tier1, tier2,
#                           tier3 in it [CLAUDEOPS_RESULTS_DIR/sessions];
#                           resume one by hand with the tier's profile:
#                           agentjail run --profile tier2 --claude-dir
#                           SESSIONS/tier2 -- claude --resume ID
#   CLAUDEOPS_PROMPTS_DIR   tier1.md, tier2.md, tier3.md [beside this script]
#   CLAUDEOPS_MCP_BASELINE  the baseline MCP config [mcp.baseline.json beside this script]
#                           (both where no run may write: not under the state
#                           directory or a repository)
#   CLAUDEOPS_TIERn_MODEL   claude's --model per tier [haiku, sonnet, opus]
#   CLAUDEOPS_TIERn_TOOLS   claude's --allowedTools per tier
#   CLAUDEOPS_TIERn_PROFILE agentjail profile per tier [tier1, tier2, tier3]
#   CLAUDEOPS_TIERn_TIMEOUT, CLAUDEOPS_TIERn_IDLE
#                           agentjail --timeout/--idle-timeout per tier [the profile's]
#   CLAUDEOPS_TIERn_ALLOW_NET
#                           hosts the tier's runs may reach besides the API, one
#                           agentjail --allow-net each, space-separated: the
#                           remote MCP servers' hosts (docs/network.md) [none]
#   CLAUDEOPS_USER          agentjail --user (when the loop runs as root)
#   CLAUDEOPS_DRY_RUN       told to the agent [false]
#   ANTHROPIC_API_KEY_FILE  a file holding the API key (a Secret mounted read-only)
#   AGENTJAIL, CLAUDE       the two programs [agentjail, claude on the PATH];
#                           AGENTJAIL=agentjail-run runs each tier through
#                           the resident launcher (docs/launcher.md)
#
# Needs node (there wherever Claude Code was installed with npm) for the
# JSON work. Exits 0 after CLAUDEOPS_CYCLES cycles, 3 when halted (see
# above), 128+n on signal n.

set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${CLAUDEOPS_INTERVAL:=3600}" "${CLAUDEOPS_CYCLES:=0}"
: "${CLAUDEOPS_REPOS_DIR:=/repos}" "${CLAUDEOPS_STATE_DIR:=/state}" "${CLAUDEOPS_RESULTS_DIR:=/results}"
: "${CLAUDEOPS_PROMPTS_DIR:=$here/prompts}" "${CLAUDEOPS_MCP_BASELINE:=$here/mcp.baseline.json}"
: "${CLAUDEOPS_SESSIONS_DIR:=$CLAUDEOPS_RESULTS_DIR/sessions}"
: "${CLAUDEOPS_TIER1_MODEL:=haiku}" "${CLAUDEOPS_TIER2_MODEL:=sonnet}" "${CLAUDEOPS_TIER3_MODEL:=opus}"
: "${CLAUDEOPS_TIER1_TOOLS:=Bash,Read,Grep,Glob,WebFetch}"
: "${CLAUDEOPS_TIER2_TOOLS:=Bash,Read,Grep,Glob,WebFetch,Edit,Write}"
: "${CLAUDEOPS_TIER3_TOOLS:=Bash,Read,Grep,Glob,WebFetch,Edit,Write}"
: "${CLAUDEOPS_DRY_RUN:=false}" "${AGENTJAIL:=agentjail}" "${CLAUDE:=claude}"

log() { printf '%s ops-loop: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }

# A run broke the policy in an earlier life of the loop: nothing starts
# until the operator has looked.
halt=$CLAUDEOPS_RESULTS_DIR/HALTED
if [ -e "$halt" ]; then
	log "halted: a run broke the jail's policy. $halt says what; check and remove what it made, then remove $halt"
	cat "$halt" >&2
	exit 3
fi

# The API key from a file: a Kubernetes Secret (or any secret) mounted
# read-only, rather than a value in the pod's environment.
if [ -n "${ANTHROPIC_API_KEY_FILE:-}" ]; then
	ANTHROPIC_API_KEY=$(cat "$ANTHROPIC_API_KEY_FILE") || { log "cannot read ANTHROPIC_API_KEY_FILE ($ANTHROPIC_API_KEY_FILE)"; exit 1; }
	export ANTHROPIC_API_KEY
fi

# A signal ends the loop once the run in progress has ended: agentjail run
# gets the same signal (init forwards it to the whole process group) and
# ends its jail with the profile's grace.
# Between cycles the loop waits on a sleep of its own ($sleeper), which a
# signal ends at once, whenever it comes (see the end of the loop). The
# sleep is ended with SIGKILL: a forked shell runs this trap's handler
# until it execs sleep, so a SIGTERM that reaches it in between is taken
# and lost, and the sleep would run the whole interval (seen in 1 run of
# 10 with the signal sent just after the fork).
stopping= sleeper=
stop() {
	stopping=$1
	[ -n "$sleeper" ] && kill -KILL "$sleeper" 2>/dev/null
}
trap 'stop TERM' TERM
trap 'stop INT' INT
trap 'stop HUP' HUP
stop_code() { case $stopping in TERM) echo 143 ;; INT) echo 130 ;; HUP) echo 129 ;; esac; }

# merge_mcp OUT BASELINE [REPO_CONFIG...]: seed 004's merge, written
# atomically. A file that is not JSON is skipped and said so.
merge_mcp() {
	node -e '
const fs = require("fs");
const [out, ...files] = process.argv.slice(1);
let merged = {mcpServers: {}};
files.forEach((f, i) => {
	let doc;
	try { doc = JSON.parse(fs.readFileSync(f, "utf8")); }
	catch (e) { if (e.code !== "ENOENT") console.error(`ops-loop: skipping ${f}: ${e.message}`); return; }
	if (i === 0) merged = {...doc, mcpServers: {}};
	Object.assign(merged.mcpServers, doc.mcpServers || {});
});
fs.writeFileSync(out + ".tmp", JSON.stringify(merged, null, 2) + "\n");
fs.renameSync(out + ".tmp", out);
' "$@"
}

# report RECORD: the tier's report, claude's result text, from its record.
report() {
	node -e '
const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
process.stdout.write((r.claude && r.claude.result) || "");
' "$1" 2>/dev/null
}

# violations RECORD CODE: what a run did against the policy, a line each:
# its record's violations when the reason is "violation", or, for
# agentjail's exit 123 or 125 with no readable record, that. Nothing for any
# other run.
violations() {
	node -e '
const [file, code] = process.argv.slice(1);
let r;
try { r = JSON.parse(require("fs").readFileSync(file, "utf8")); }
catch (e) {
	if (code === "123") console.log(`agentjail exited 123 (a policy violation) and its record cannot say which: ${e.message}`);
	if (code === "125") console.log(`agentjail exited 125 and its record cannot tell why: ${e.message}`);
	process.exit(0);
}
if (r.reason !== "violation") process.exit(0);
const v = r.violations || [];
if (v.length === 0) console.log("reason violation, none listed");
v.forEach((x) => console.log(`${x.what}: ${x.detail}`));
' "$1" "$2"
}

# setup_failed RECORD: agentjail's message when the run's jail could not
# be set up (reason setup_failed), else nothing.
setup_failed() {
	node -e '
try {
	const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
	if (r.reason === "setup_failed") console.log(r.error || "no message");
} catch (e) {}
' "$1" 2>/dev/null
}

# halt_loop N CYCLE_DIR VIOLATIONS: stop for good (see the header).
halt_loop() {
	log "tier $1 broke the jail's policy; no further tier, no further cycle until the operator removes $halt:"
	printf '%s\n' "$3" | while IFS= read -r v; do log "violation: $v"; done
	{
		printf 'tier %s of %s broke the policy (its record: %s):\n%s\n' "$1" "$2" "$2/tier$1.record.json" "$3"
		printf 'Nothing was restored. Check and remove what the run made, then remove this file.\n'
	} >"$halt" || log "cannot write $halt"
	halted=1
}

# status TEXT: the word of the last "STATUS: word" line.
status() { printf '%s\n' "$1" | sed -n 's/^[[:space:]]*STATUS:[[:space:]]*\([A-Za-z]*\).*/\1/p' | tail -n 1; }

# run_tier N CYCLE_DIR REPORTS: one jailed claude run, told the earlier
# tiers' reports; its exit code is agentjail's (claude's own, 122 at a cap,
# 123 for a policy violation, 124 for a timeout, 125 for a jail that could
# not be made), or 1 when the tier's prompt cannot be read.
run_tier() {
	n=$1 dir=$2 reports=$3
	eval "model=\$CLAUDEOPS_TIER${n}_MODEL tools=\$CLAUDEOPS_TIER${n}_TOOLS"
	eval "profile=\${CLAUDEOPS_TIER${n}_PROFILE:-tier$n} timeout=\${CLAUDEOPS_TIER${n}_TIMEOUT:-} idle=\${CLAUDEOPS_TIER${n}_IDLE:-}"
	eval "allow=\${CLAUDEOPS_TIER${n}_ALLOW_NET:-}"
	prompt=$(cat "$CLAUDEOPS_PROMPTS_DIR/tier$n.md") || return 1 # no run, no record: no violation either
	if [ -n "$reports" ]; then
		prompt=$(printf '%s\n\nThe earlier tiers escalated to you. Their reports:\n%s\n' "$prompt" "$reports")
	fi
	context="Environment: CLAUDEOPS_TIER=$n CLAUDEOPS_DRY_RUN=$CLAUDEOPS_DRY_RUN CLAUDEOPS_STATE_DIR=$CLAUDEOPS_STATE_DIR CLAUDEOPS_REPOS_DIR=$CLAUDEOPS_REPOS_DIR CLAUDEOPS_RESULTS_DIR=$dir"
	# MCP_CONNECTION_NONBLOCKING=false: the MCP servers are connected
	# before the first model call (claude -p otherwise starts without them).
	set -- --profile "$profile" --write "$CLAUDEOPS_STATE_DIR" --chdir "$dir" --env MCP_CONNECTION_NONBLOCKING=false \
		--log "$dir/tier$n.log" --record "$dir/tier$n.record.json" --results "$CLAUDEOPS_RESULTS_DIR/transcripts" \
		--claude-dir "$CLAUDEOPS_SESSIONS_DIR/tier$n"
	# Each repository a root of its own, not their parent: agentjail makes
	# a protected name missing at the top of a root uncreatable, but below
	# the top it only finds one made after the run (docs/jail.md, "The promise,
	# exactly"), too late for a .claude-ops/mcp.json the next tier merges.
	if [ "$n" -gt 1 ]; then
		for repo in "$CLAUDEOPS_REPOS_DIR"/*/; do
			[ -d "$repo" ] && set -- "$@" --write "${repo%/}"
		done
	fi
	[ -n "${CLAUDEOPS_USER:-}" ] && set -- "$@" --user "$CLAUDEOPS_USER"
	[ -n "$timeout" ] && set -- "$@" --timeout "$timeout"
	[ -n "$idle" ] && set -- "$@" --idle-timeout "$idle"
	set -f # *.example.com is an entry, not a glob
	for a in $allow; do
		set -- "$@" --allow-net "$a"
	done
	set +f
	# agentjail-run takes agentjail run's arguments (docs/launcher.md).
	case ${AGENTJAIL##*/} in
	agentjail-run) ;;
	*) set -- run "$@" ;;
	esac
	log "tier $n ($profile, $model)"
	"$AGENTJAIL" "$@" -- "$CLAUDE" --print --output-format json --model "$model" \
		--mcp-config "$dir/mcp.json" --strict-mcp-config --allowedTools "$tools" \
		--append-system-prompt "$context" -- "$prompt" >/dev/null </dev/null
}

cycle() {
	dir=$CLAUDEOPS_RESULTS_DIR/$(date -u +%Y%m%dT%H%M%SZ)-$$-$1
	mkdir -p "$dir" "$CLAUDEOPS_RESULTS_DIR/transcripts" && chmod 755 "$dir" || return
	set -- "$CLAUDEOPS_MCP_BASELINE"
	for repo in "$CLAUDEOPS_REPOS_DIR"/*/; do
		f=$repo.claude-ops/mcp.json
		[ -f "$f" ] || continue
		case $nl$configs in
		*"$nl$f$nl"*) set -- "$@" "$f" ;;
		*) log "ignoring $f: it was not there when the loop started (restart the loop to take it)" ;;
		esac
	done
	merge_mcp "$dir/mcp.json" "$@" || { log "cannot merge the MCP configs; cycle skipped"; return; }
	reports=
	for n in 1 2 3; do
		run_tier "$n" "$dir" "$reports"
		code=$?
		# Checked first: a violation halts even a loop that is stopping.
		broke=$(violations "$dir/tier$n.record.json" "$code") || broke="cannot check $dir/tier$n.record.json for violations"
		if [ -n "$broke" ]; then
			halt_loop "$n" "$dir" "$broke"
			return
		fi
		# A jail that could not be set up ran no agent: a more privileged
		# tier is not the answer to a configuration error.
		why=$(setup_failed "$dir/tier$n.record.json")
		if [ -n "$why" ]; then
			log "tier $n could not start, no further tier this cycle: $why"
			setup=1
			return
		fi
		text=$(report "$dir/tier$n.record.json")
		word=$(status "$text")
		log "tier $n: exit $code, status ${word:-none}"
		[ -n "$stopping" ] && return
		case $n:$code:$word in
		1:0:healthy | [23]:0:resolved) return ;;
		esac
		reports=$(printf '%s\n\n--- tier %d (exit code %d) ---\n%s' "$reports" "$n" "$code" "${text:-(no report; see its record)}")
	done
	log "tier 3 did not resolve it; the operator must look: $dir"
}

# The per-repo MCP configs the cycles may merge: those there now, before
# any run (see the header), one path a line.
nl='
'
configs=
for repo in "$CLAUDEOPS_REPOS_DIR"/*/; do
	[ -f "$repo.claude-ops/mcp.json" ] && configs=$configs$repo.claude-ops/mcp.json$nl
done

i=0 halted=
while :; do
	i=$((i + 1))
	setup=
	cycle "$i"
	[ -n "$halted" ] && exit 3
	[ -n "$stopping" ] && exit "$(stop_code)"
	if [ "$CLAUDEOPS_CYCLES" -gt 0 ] && [ "$i" -ge "$CLAUDEOPS_CYCLES" ]; then
		[ -n "$setup" ] && exit 125 # the last cycle's jail could not be set up
		exit 0
	fi
	# A signal interrupts the wait (a trap's signal ends wait, POSIX), and
	# the trap ends the sleep; one that came after the check above but
	# before $sleeper was set found no sleep to end, and is seen here.
	sleep "$CLAUDEOPS_INTERVAL" &
	sleeper=$!
	[ -n "$stopping" ] && kill -KILL "$sleeper" 2>/dev/null
	wait "$sleeper" 2>/dev/null # dash says "Killed" of it
	sleeper=
	[ -n "$stopping" ] && exit "$(stop_code)"
done
