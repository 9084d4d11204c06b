# agentjail as a container: `agentjail init` is PID 1 and runs the ops loop,
# which jails each agent run with `agentjail run`. See docs/containers.md for
# the `docker run` flags this image needs (seccomp profile, /proc, AppArmor).
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t agentjail .

# Build: cgo with libseccomp (the seccomp filters need both), on the Debian
# release the runtime stage uses, so glibc and libseccomp.so.2 match.
FROM golang:1.26-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends libseccomp-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# .ci/release --check refuses a binary without cgo and libseccomp; the export
# needs libseccomp too, and ships the container profile in the image.
# agentjail-init is what PID 1 becomes: `agentjail init` hands over to it
# (static and small: what stays resident for the container's life);
# agentjail-exec is every jail's exec stage (static and small: it starts in
# every launch); agentjail-run launches through `agentjail launcher`
# (docs/launcher.md).
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/agentjail ./cmd/agentjail \
 && ./.ci/release --check "$(go env GOARCH)" /out/agentjail \
 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/agentjail-init ./cmd/agentjail-init \
 && gcc -static -Os -s -Wall -Werror -o /out/agentjail-exec cmd/agentjail-exec/stage.c \
 && gcc -static -Os -s -Wall -Werror -o /out/agentjail-run cmd/agentjail-run/client.c \
 && /out/agentjail seccomp export --for-container > /out/seccomp-container.json

# Runtime: bubblewrap, libseccomp, Node.js and a pinned Claude Code (socat and
# ripgrep: its own Linux sandbox needs them).
FROM debian:12-slim
ARG CLAUDE_CODE_VERSION=2.1.197
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap libseccomp2 nodejs npm ca-certificates git socat ripgrep \
 && npm install -g "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}" \
 && npm cache clean --force \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 1000 --user-group --create-home --shell /bin/bash agent \
 && install -d -o 1000 -g 1000 /state /repos /results
COPY --from=build /out/agentjail /out/agentjail-init /out/agentjail-exec /out/agentjail-run /usr/local/bin/
COPY --from=build /out/seccomp-container.json /usr/share/agentjail/seccomp-container.json
COPY examples/ /opt/agentjail/examples/
# The agent user (uid 1000), never root: agentjail then runs bubblewrap
# unprivileged in a user namespace, and the agent's own sandbox can mount a
# fresh /proc. Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 1000:1000
WORKDIR /home/agent
ENTRYPOINT ["agentjail", "init", "--"]
# The ops loop: a cycle every CLAUDEOPS_INTERVAL seconds (CLAUDEOPS_CYCLES=1:
# one). It reads /repos, lets the runs write /state, keeps results in /results.
CMD ["/opt/agentjail/examples/claude-ops/ops-loop.sh"]
