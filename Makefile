# agentjail — `make demo` and `make test` work on a fresh Debian 12 machine
# as root with Go on the PATH (go.mod's version, or >= 1.21 with
# GOTOOLCHAIN=auto; .ci/gocheck says which): both install what is missing first.

GO        ?= go
CC        ?= gcc
BIN       := bin/agentjail
INIT_BIN  := bin/agentjail-init
EXEC_BIN  := bin/agentjail-exec
RUN_BIN   := bin/agentjail-run
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
STARTED   := $(shell date +%s)

# Debian packages: what agentjail needs to build and run (gcc without its
# recommended libc6-dev cannot build cgo; the go command fetches modules over
# TLS), then what the tests and benchmarks drive.
RUNTIME_PKGS := bubblewrap libseccomp-dev gcc libc6-dev pkg-config ca-certificates
TEST_PKGS    := runc tini dumb-init catatonit socat ripgrep ruby iproute2 procps util-linux file acl zsh fish bash-completion git curl
BENCH_PKGS   := hyperfine tinyproxy-bin
# make release and make test-release cross-build arm64 with cgo (Debian's
# multiarch archive only; adds dpkg's arm64 architecture): never make test.
RELEASE_PKGS := gcc-aarch64-linux-gnu libc6-dev-arm64-cross libseccomp-dev:arm64

# The Claude Code release the end-to-end tests drive, installed with npm
# where the jails can see it (not under /tmp or a home). The Dockerfile pins
# the same one (a test checks).
CLAUDE_VERSION := 2.1.197
export AGENTJAIL_TEST_CLAUDE_DIR ?= /var/cache/agentjail-test/claude
# The Codex CLI release the end-to-end tests drive (docs/codex.md), installed
# the same way.
CODEX_VERSION := 0.169.0
export AGENTJAIL_TEST_CODEX_DIR ?= /var/cache/agentjail-test/codex

# The tests run through testprogress: a line per package as it finishes,
# what runs when nothing has finished for 30 s, the totals and the skips.
TESTPROGRESS := $(GO) run ./internal/tools/testprogress

.PHONY: all deps deps-runtime deps-bench claude codex build release image demo test test-release test-short escapes bench fuzz profiles vagrant-test kubernetes-seccomp clean

all: build

# deps installs only the missing packages (the package index is refreshed
# only then) and checks that the go on the PATH builds go.mod's Go
# (.ci/gocheck); .ci/provision is shared with the Vagrant boxes (Debian,
# Ubuntu, Fedora). deps-runtime: what building and running agentjail needs.
deps:
	@./.ci/provision $(RUNTIME_PKGS) $(TEST_PKGS)

deps-runtime:
	@./.ci/provision $(RUNTIME_PKGS)

deps-bench:
	@./.ci/provision $(RUNTIME_PKGS) $(TEST_PKGS) $(BENCH_PKGS)

# claude and codex install Claude Code and the Codex CLI for the tests when
# missing; when npm or its registry cannot be reached, the tests that run
# them skip and say so.
claude:
	-@./.ci/npm-agent $(AGENTJAIL_TEST_CLAUDE_DIR) @anthropic-ai/claude-code $(CLAUDE_VERSION) claude

codex:
	-@./.ci/npm-agent $(AGENTJAIL_TEST_CODEX_DIR) @openai/codex $(CODEX_VERSION) codex

# build checks the go first: an old one with GOTOOLCHAIN=local would fail
# with "go.mod requires go >= ..." and no way forward.
build:
	@GO=$(GO) ./.ci/gocheck
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/agentjail
	CGO_ENABLED=0 $(GO) build -o $(INIT_BIN) ./cmd/agentjail-init
	$(CC) -static -Os -s -Wall -Werror -o $(EXEC_BIN) cmd/agentjail-exec/stage.c
	$(CC) -static -Os -s -Wall -Werror -o $(RUN_BIN) cmd/agentjail-run/client.c

# release builds dist/agentjail-$(VERSION)-linux-{amd64,arm64} with cgo and
# libseccomp, the static dist/agentjail-init-$(VERSION)-linux-{amd64,arm64},
# and SHA256SUMS, and refuses a binary without them.
release:
	@./.ci/provision $(RUNTIME_PKGS) $(RELEASE_PKGS)
	VERSION=$(VERSION) ./.ci/release dist

# image builds the container image (Dockerfile, docs/containers.md). It needs
# a Docker engine: make test checks the Dockerfile statically instead.
image:
	docker build --build-arg VERSION=$(VERSION) -t agentjail:$(VERSION) .

# demo jails a shell on the built-in tier1 profile: a write to a protected
# .env is refused, a write to its writable root is allowed. It installs only
# what agentjail needs to build and run, none of the test tools.
demo: deps-runtime build
	@./examples/demo.sh $(BIN)

# test runs every test but the release build's (make test-release); those
# needing root and bubblewrap run here (as root), then each fuzz target
# briefly (make fuzz runs them longer). The brief runs are budgeted in
# executions (about 8 s each here), not seconds: Go 1.26's fuzz coordinator
# can fail a target with "context deadline exceeded" when a duration
# -fuzztime ends while a worker is mid-input (go.dev/issue/75804, fixed in
# Go 1.27); a count has no deadline to race.
# test/packaging runs on its own, after the rest: it builds agentjail with
# cgo (make demo), which on 2 cores would starve the timing-sensitive jail
# tests (idle timeouts) running beside it.
test: deps profiles claude codex
	$(GO) mod tidy -diff
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo 'gofmt: the files above are not formatted; run gofmt -w on them'; exit 1; }
	$(GO) vet ./...
	$(TESTPROGRESS) $(GO) test -json -count=1 -timeout 15m $$($(GO) list ./... | grep -v /test/packaging)
	$(TESTPROGRESS) $(GO) test -json -count=1 -timeout 10m ./test/packaging/
	$(call fuzz,FuzzImport,./seccomp/,120000x -fuzzminimizetime 1000x)
	$(call fuzz,FuzzLoad,./policy/,80000x -fuzzminimizetime 1000x)
	$(call fuzz,FuzzParser,./claude/,250000x -fuzzminimizetime 1000x)
	@s=$$(($$(date +%s) - $(STARTED))); echo "make test: passed in $$((s / 60))m$$((s % 60))s"

# test-release runs the release build's test (TestRelease: .ci/release
# cross-builds arm64 with cgo), after installing the cross toolchain, which
# on Debian adds dpkg's arm64 architecture. CI runs it after make test.
test-release:
	@./.ci/provision $(RUNTIME_PKGS) $(RELEASE_PKGS)
	AGENTJAIL_TEST_RELEASE=1 $(TESTPROGRESS) $(GO) test -json -count=1 -timeout 20m -run '^TestRelease$$' ./test/packaging/

# profiles fetches Docker's and Podman's default seccomp profiles (unpacked
# from Debian's packages, not installed) for the import tests.
profiles:
	@./.ci/profiles seccomp/testdata/external

# escapes runs the escapes suite alone: each escape class shown under plain
# bubblewrap, then closed under agentjail (test/integration/escapes_test.go).
escapes: deps
	$(GO) test -count=1 -run '^(TestEscape|TestSymlinkedProtectedPaths|TestHostileInputFiles|TestSignalWhileReadingAPipe)' -v ./test/integration/

test-short:
	$(GO) test -short ./...

bench: deps-bench build
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./test/bench/

fuzz: profiles
	$(call fuzz,FuzzImport,./seccomp/,$${FUZZTIME:-5m})
	$(call fuzz,FuzzLoad,./policy/,$${FUZZTIME:-5m})
	$(call fuzz,FuzzParser,./claude/,$${FUZZTIME:-5m})

# fuzz runs one fuzz target (1) of package (2) for -fuzztime (3).
fuzz = $(GO) test -run '^$$' -fuzz '^$(1)$$' -fuzztime $(3) $(2)

# kubernetes-seccomp regenerates the Localhost seccomp profile the
# Kubernetes manifests use (a test fails when it is stale).
kubernetes-seccomp:
	$(GO) run ./cmd/agentjail seccomp export --for-container > deploy/kubernetes/seccomp/agentjail-container.json

# vagrant-test runs make test in each Vagrant machine (Ubuntu 24.04, Debian
# 12, Fedora), or in those named by VMS="debian-12 ...". Needs Vagrant and a
# hypervisor; see docs/vagrant.md.
vagrant-test:
	@./.ci/vagrant-test $(VMS)

clean:
	rm -rf bin dist
