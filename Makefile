# agentjail — `make demo` and `make test` work on a fresh Debian 12 machine
# as root with Go on the PATH: both install what is missing first.

GO        ?= go
BIN       := bin/agentjail
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)

# Debian packages: what agentjail needs to build and run, then what the
# tests and benchmarks drive.
RUNTIME_PKGS := bubblewrap libseccomp-dev gcc pkg-config
TEST_PKGS    := runc tini dumb-init catatonit socat ripgrep ruby iproute2 procps util-linux
BENCH_PKGS   := hyperfine

# The Claude Code release the end-to-end tests drive, installed with npm
# where the jails can see it (not under /tmp or a home).
CLAUDE_VERSION := 2.1.197
export AGENTJAIL_TEST_CLAUDE_DIR ?= /var/cache/agentjail-test/claude

.PHONY: all deps deps-bench claude build demo test test-short escapes bench fuzz profiles clean

all: build

# deps installs only the missing packages (apt-get update runs only then).
deps:
	@./.ci/deps $(RUNTIME_PKGS) $(TEST_PKGS)

deps-bench:
	@./.ci/deps $(RUNTIME_PKGS) $(TEST_PKGS) $(BENCH_PKGS)

# claude installs Claude Code for the tests when missing; when npm or its
# registry cannot be reached, the tests that run claude skip and say so.
claude:
	-@./.ci/claude $(AGENTJAIL_TEST_CLAUDE_DIR) $(CLAUDE_VERSION)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/agentjail

# demo jails a shell on the built-in tier1 profile: a write to a protected
# .env is refused, a write to its writable root is allowed.
demo: deps build
	@./examples/demo.sh $(BIN)

# test runs every test; those needing root and bubblewrap run here (as root),
# then each fuzz target briefly (make fuzz runs them longer).
test: deps profiles claude
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 15m ./...
	$(GO) test -run '^$$' -fuzz '^FuzzImport$$' -fuzztime 10s -fuzzminimizetime 2s ./seccomp/
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime 10s -fuzzminimizetime 2s ./policy/
	$(GO) test -run '^$$' -fuzz '^FuzzParser$$' -fuzztime 10s -fuzzminimizetime 2s ./claude/

# profiles fetches Docker's and Podman's default seccomp profiles (unpacked
# from Debian's packages, not installed) for the import tests.
profiles:
	@./.ci/profiles seccomp/testdata/external

# escapes runs the escapes suite alone: each escape class shown under plain
# bubblewrap, then closed under agentjail (test/integration/escapes_test.go).
escapes: deps
	$(GO) test -count=1 -run '^TestEscape' -v ./test/integration/

test-short:
	$(GO) test -short ./...

bench: deps-bench build
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./test/bench/

fuzz: profiles
	$(GO) test -run '^$$' -fuzz '^FuzzImport$$' -fuzztime $${FUZZTIME:-5m} ./seccomp/
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $${FUZZTIME:-5m} ./policy/
	$(GO) test -run '^$$' -fuzz '^FuzzParser$$' -fuzztime $${FUZZTIME:-5m} ./claude/

clean:
	rm -rf bin
