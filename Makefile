# computerfs: run `make help` for the targets.

GO       ?= go
BIN      := bin
PKGS     := ./...
# Tests mount FUSE file systems and create users' files: they run as root.
TESTFLAGS ?= -race -count=1 -timeout 30m
# The sandbox's seccomp filter needs libseccomp (libseccomp-dev) and this tag.
TAGS      ?= seccomp
# The C exec client (clients/c): libc only; testmount.CFlags are the same.
CC        ?= cc
CEXEC_CFLAGS ?= -O2 -Wall -Wextra -Werror
# What `computerfs version` and the MCP server report (else the Go build's record).
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS   := -X github.com/computerfs/computerfs/internal/version.stamped=$(VERSION)

.PHONY: help deps build test test-short bench bench-sources bench-exec bench-sandbox bench-tools bench-sync bench-policy bench-limits bench-snapshots stress run lint fuzz docs clean

help: ## show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps: ## install the Debian packages the build and the tests need and the machine lacks (scripts/packages.txt)
	@./scripts/deps.sh

build: deps ## build bin/computerfs, bin/computerfs-exec (the thin exec client), bin/computerfs-exec-c (the same in C) and bin/sandboxctl
	$(GO) build -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/computerfs ./cmd/computerfs
	$(GO) build -o $(BIN)/computerfs-exec ./cmd/computerfs-exec
	$(CC) $(CEXEC_CFLAGS) -o $(BIN)/computerfs-exec-c clients/c/computerfs-exec.c
	$(GO) build -tags '$(TAGS)' -o $(BIN)/sandboxctl ./cmd/sandboxctl

test: deps lint ## run every test under -race (needs root and /dev/fuse)
	$(GO) test -tags '$(TAGS)' $(TESTFLAGS) $(PKGS)

test-short: deps ## the quick subset of the tests
	$(GO) test -tags '$(TAGS)' -short -count=1 $(PKGS)

lint: deps ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags '$(TAGS)' $(PKGS)

bench: build bench-sources bench-exec bench-sandbox bench-tools bench-sync bench-policy bench-limits bench-snapshots ## benchmark the mount against tmpfs, disk, go-fuse's loopback and the floor (loopback over tmpfs with our mount options); imports and sync back against git clone and the S3 SDK; exec backends; the sandbox; the agent tools
	./bench/run.sh

bench-sources: ## benchmark git and S3 imports against git clone and the SDK (ratios)
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 30m ./sources/ | tee bench/sources.txt

bench-exec: ## latency of the shell corpus through the daemon: fast path vs sandbox vs bash on tmpfs; then agent commands from every client (computerfs-exec, computerfs exec, the control socket, MCP) vs bash -c on the mount and on tmpfs (median, p99, CPU; BENCH_EXEC_ROUNDS)
	$(GO) test -tags '$(TAGS)' -run '^$$' -bench 'Corpus|ExecBackends' -benchtime 1x -timeout 30m ./sandbox/shell/ | tee bench/exec.txt
	$(GO) test -tags '$(TAGS)' -run '^$$' -bench 'ExecClients' -benchtime 1x -timeout 30m . | tee -a bench/exec.txt

bench-sandbox: build ## benchmark the sandbox's cold and warm starts against runc and bwrap, and a Go build in it on the mount against one on disk (ratios)
	$(GO) run -tags '$(TAGS)' ./sandbox/bench -sandboxctl $(BIN)/sandboxctl -computerfs $(BIN)/computerfs -build | tee bench/sandbox.txt

bench-tools: ## agent tools over MCP stdio against cat, sed -i, bash -c and grep -rn on tmpfs (median, p99)
	$(GO) test -run '^$$' -bench ToolsLatency -benchtime 1x -timeout 20m . | tee bench/tools.txt
	$(GO) test -run '^$$' -bench . ./tools/ | tee -a bench/tools.txt

bench-sync: ## benchmark sync back against the S3 SDK and git push-back against the git CLI (ratios; BENCH_SYNC_LARGE=1024 for a 1 GiB file) and close-to-S3 latency
	$(GO) test -run '^$$' -bench 'SyncSmall|SyncLarge|GitPush' -benchtime 3x -timeout 30m ./syncer/ | tee bench/sync.txt
	$(GO) test -run '^$$' -bench 'SyncLatency' -benchtime 2x -timeout 10m . | tee -a bench/sync.txt

bench-snapshots: ## snapshot, fork and rollback of 100 MB and 1 GB stores against cp -a; hibernate (first, incremental) and resume (lazy, eager) against plain PutObject of every file, on versitygw
	$(GO) test -tags '$(TAGS)' -run '^$$' -bench 'Snapshot|Rollback' -benchtime 3x -timeout 60m ./kv/ | tee bench/snapshots.txt
	$(GO) test -tags '$(TAGS)' -run '^$$' -bench Image -benchtime 1x -timeout 60m ./hibernate/ | tee -a bench/snapshots.txt
	$(GO) test -tags '$(TAGS)' -run '^$$' -bench Resume -benchtime 1x -timeout 60m . | tee -a bench/snapshots.txt

bench-policy: ## what the agent identity and ten path rules cost the fast path and the mount (variants interleaved in one run; medians and ratios of CPU and wall time; BENCH_POLICY_ROUNDS)
	$(GO) test -tags '$(TAGS)' -run '^$$' -bench PolicyFastPath -benchtime 1x -timeout 30m ./sandbox/shell/ | tee bench/policy.txt
	$(GO) test -tags '$(TAGS)' -run '^$$' -bench PolicyMount -benchtime 1x -timeout 30m . | tee -a bench/policy.txt

bench-limits: ## what the fast path's memory guards cost: guarded shell statements and awk programs against the same unguarded, alternating (ratios)
	$(GO) test -tags '$(TAGS)' -run '^$$' -bench 'Guards|AwkGuard' -benchtime 5x -timeout 30m ./sandbox/shell/ | tee bench/limits.txt

.PHONY: bench-grep
bench-grep: ## CPU of whole-tree grep -rn, rg and find on the fast path against GNU grep, find and rg on the mount (the program's and the daemon's CPU; interleaved rounds, ratios; BENCH_GREP_ROUNDS, BENCH_GREP_CMDS)
	$(GO) test -tags '$(TAGS)' -run '^$$' -bench GrepCPU -benchtime 1x -timeout 30m ./sandbox/shell/ | tee bench/grep.txt

stress: ## long randomized and parallel tests against the mount
	FSTEST_LONG=1 COMPUTERFS_HUGE_DIR=1000000 $(GO) test -count=1 -timeout 90m -v -run 'FSX|Stress|Crash|Huge' ./fs/ ./fstest/ ./kv/

fuzz: ## fuzz the store's operations and name handling for a while
	$(GO) test -run '^$$' -fuzz FuzzOps -fuzztime 2m -fuzzminimizetime 5s ./kv/
	$(GO) test -run '^$$' -fuzz FuzzName -fuzztime 1m -fuzzminimizetime 5s ./kv/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 1m -fuzzminimizetime 5s ./spec/
	$(GO) test -run '^$$' -fuzz FuzzCleanPath -fuzztime 30s -fuzzminimizetime 5s ./spec/
	$(GO) test -run '^$$' -fuzz FuzzResolve -fuzztime 1m -fuzzminimizetime 5s ./wsfs/
	$(GO) test -tags '$(TAGS)' -run '^$$' -fuzz FuzzCommand -fuzztime 30s -fuzzminimizetime 5s ./sandbox/
	$(GO) test -run '^$$' -fuzz FuzzConfinement -fuzztime 1m -fuzzminimizetime 5s ./tools/
	$(GO) test -run '^$$' -fuzz FuzzMatchPath -fuzztime 30s -fuzzminimizetime 5s ./spec/
	$(GO) test -run '^$$' -fuzz FuzzTreePath -fuzztime 30s -fuzzminimizetime 5s ./spec/
	$(GO) test -run '^$$' -fuzz FuzzChecker -fuzztime 30s -fuzzminimizetime 5s ./policy/
	$(GO) test -run '^$$' -fuzz FuzzGuard -fuzztime 1m -fuzzminimizetime 5s ./wsfs/
	$(GO) test -tags '$(TAGS)' -run '^$$' -fuzz FuzzExecInPipeline -fuzztime 1m -fuzzminimizetime 5s ./sandbox/shell/
	$(GO) test -tags '$(TAGS)' -run '^$$' -fuzz FuzzJq -fuzztime 1m -fuzzminimizetime 5s ./sandbox/shell/
	$(GO) test -run '^$$' -fuzz FuzzRender -fuzztime 20s -fuzzminimizetime 5s ./internal/textsafe/

run: build ## demo: mount a workspace from a spec with a local git repository, refresh it, remount
	./scripts/demo.sh

docs: build ## regenerate the command reference in docs/cli.md from the binary's help
	./scripts/cli-doc.sh $(BIN)/computerfs

clean: ## remove build output
	rm -rf $(BIN)
