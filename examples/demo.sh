#!/bin/sh
# agentjail demo: a jailed shell on the built-in tier1 profile tries to
# overwrite a protected .env (refused) and writes to its writable root
# (allowed). Run as root: `make demo`.
set -eu
A=$(realpath "${1:-bin/agentjail}")
D=$(mktemp -d /var/tmp/agentjail-demo.XXXXXX)
trap 'rm -rf "$D"' EXIT
mkdir -p "$D/project"
echo 'API_KEY=do-not-touch' > "$D/project/.env"
echo 'print("hello")' > "$D/project/app.py"
# The project belongs to an unprivileged user: agentjail runs the agent as
# the owner of the start directory (never as root).
chown -R nobody:nogroup "$D"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "the jail agentjail builds for this run (agentjail render)"
"$A" render --profile tier1 --write "$D/project" --chdir "$D/project" -- sh -c 'true' | grep -v '^#' | fold -w 160 | head -6
echo "   ..."

say "a jailed shell writes to its project and tries to change .env"
set +e
"$A" run --profile tier1 --write "$D/project" --chdir "$D/project" -- sh -c '
	echo "agent: running as $(id -un), capabilities: $(grep CapEff /proc/self/status | cut -f2)"
	echo "result of the run" > results.txt && echo "agent: wrote results.txt (allowed: writable root)"
	echo "API_KEY=stolen" > .env || echo "agent: overwriting .env was refused"
	touch /etc/agentjail-demo 2>/dev/null || echo "agent: writing /etc was refused"
	ls ~/.ssh >/dev/null 2>&1 || echo "agent: ~/.ssh is not there"
'
rc=$?
set -e

say "on the host, after the run (exit code $rc)"
printf 'results.txt: %s\n' "$(cat "$D/project/results.txt")"
printf '.env:        %s\n' "$(cat "$D/project/.env")"
if [ "$(cat "$D/project/.env")" = "API_KEY=do-not-touch" ] && [ -f "$D/project/results.txt" ]; then
	echo "demo ok: the protected file is unchanged and the allowed write landed"
else
	echo "demo FAILED" >&2
	exit 1
fi
