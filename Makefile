# The two commands of the README:
#   make run   — install what is missing, build, and run the main job
#   make test  — install what is missing, vet, and run the whole test suite
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
BIN := bin/rdmaprobe
# The verbs fabric needs libibverbs headers, its rdma_cm clients
# librdmacm's; without them the binary is built without either (sim
# only) and says so. Expanded when build runs (=,
# not :=), so that the first make run, whose setup installs the headers
# just before, builds with the tag too.
TAGS = $(shell test -f /usr/include/infiniband/verbs.h -a -f /usr/include/rdma/rdma_cma.h && echo verbs)
RUN_ARGS ?= search --lo 300 --hi 600

# -trimpath keeps the checkout's directory out of what Go compiles, and so
# out of its build cache's keys: a fresh clone at a new path then reuses
# the packages, vet results and test binaries an earlier checkout built
# instead of compiling them all again. Commands the tests start (go build
# of the guest's binary) inherit it.
export GOFLAGS := $(strip -trimpath $(GOFLAGS))

.PHONY: run test setup setup-test build vet clean

run: setup build
	./$(BIN) $(RUN_ARGS)

# The tests' events are kept in bin/test.json; testbudget prints go
# test's usual lines from them, then the 15 slowest tests and each
# package's time, and fails when a test runs past its budget (60 s, or
# its ceiling in internal/testbudget/long.txt). pipefail: a failing test
# fails make test whatever the reader says.
test: setup-test vet
	@mkdir -p bin
	set -o pipefail; RDMAPROBE_REQUIRE_PARTS=1 $(GO) test -count=1 -timeout 60m -json ./... | tee bin/test.json | $(GO) run ./internal/testbudget
	$(MAKE) --no-print-directory fuzz

# The fuzz budgets are execution counts, not durations: a wall-clock
# -fuzztime makes Go's fuzz coordinator (before Go 1.27) fail at random
# under CPU load with "context deadline exceeded" and no failing input
# (golang/go#75804); a count has no deadline, so load only slows it. The
# counts match what -fuzztime 10s explored on this project's 2-core CI
# machine under load: FuzzDecode ran 450,000-780,000 execs in 10 s,
# FuzzParse 10,000-96,000 (its workers stall while minimizing new inputs).
# A crasher still fails the step and is written under testdata/fuzz.
FUZZ_DECODE ?= 600000x
FUZZ_PARSE ?= 100000x

.PHONY: fuzz
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZ_DECODE) ./exchange
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZ_PARSE) ./result

# make run installs what the default run needs; make test also what only
# the tests and optional features (--vm-peer's sshd) use.
setup:
	./scripts/setup.sh run

setup-test:
	./scripts/setup.sh test

build:
	$(GO) build -tags "$(TAGS)" -o $(BIN) .

# staticcheck, pinned: v0.8.2 is its 2026.2.2 release, the newest on the
# Go module proxy, which reads this module's Go 1.26. go install fetches
# it from the proxy (checked against the checksum database) into a
# directory named for the version, so a fresh machine gets it on its first
# make vet and bumping the version installs the new one beside the old.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := bin/tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck

$(STATICCHECK):
	GOBIN=$(CURDIR)/$(dir $@) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

vet: $(STATICCHECK)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(GO) vet -tags verbs ./...
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags verbs ./...
	# Measuring needs Linux; reading and rendering saved runs (report,
	# compare) must build for a Mac too.
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null .

clean:
	rm -rf bin

# Figures, not pass/fail: go benchmarks on sim (and verbs when a device
# exists), then the bench command on sim; `rdmaprobe bench --backend vm`
# takes the same figures inside the Soft-RoCE guest.
.PHONY: bench
bench: build
	$(GO) test -run '^$$' -bench . ./bench/
	./$(BIN) bench --backend sim

# The floor under the 1-client latency target (results/README.md, "The floor under
# the target"): in one guest, FLOOR_ROUNDS rounds in turns of ib_send_lat,
# a C echo with nothing of rdmaprobe around it (bare, then checking every
# byte as rdmaprobe does: softroce/testdata/echofloor) and rdmaprobe's
# own 1-client point, at ECHOFLOOR_SIZE bytes (default 4096).
FLOOR_ROUNDS ?= 7
.PHONY: floor
floor: setup build
	RDMAPROBE_BIN=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench EchoFloor -benchtime $(FLOOR_ROUNDS)x ./softroce/

# The runs behind the README's headline figures, each saved under results/ with
# its command (about 20 minutes on 2 cores): the ratios (bench on vm and
# sim), connect throughput at 300 and 1000 clients over 5 trials in the
# default layout, then with srq, --detach and session resumption against
# full handshakes in turns, 10,000 Soft-RoCE clients, the search of `make
# run`, and 100,000 simulated clients on the host (--detach: the server
# holds no socket per client, which this host's RLIMIT_NOFILE of 20,000
# requires).
.PHONY: figures
figures: setup build
	./$(BIN) bench --backend vm
	./$(BIN) bench --backend sim
	./$(BIN) ramp --backend vm --clients 300,1000 --trials 5
	for i in 1 2; do \
	  ./$(BIN) ramp --backend vm --clients 300,1000 --trials 5 --mode srq --detach --tls-resume && \
	  ./$(BIN) ramp --backend vm --clients 300,1000 --trials 5 --mode srq --detach || exit 1; \
	done
	./$(BIN) ramp --backend vm --clients 10000 --mode srq --detach --tls-resume
	./$(BIN) search --lo 300 --hi 600
	./$(BIN) ramp --backend sim --clients 100000 --procs 2 --mode srq --detach

# serve under waves of clients for an hour (figures, not pass/fail):
# RSS, retained heap, open files, threads and mappings per interval, and
# the growth per 100,000 clients served. SOAK_ARGS='--backend vm' runs
# it inside the Soft-RoCE guest.
SOAK_ARGS ?= --soak-duration 1h
.PHONY: soak
soak: build
	./$(BIN) bench soak $(SOAK_ARGS)
