# Ember's single entry point. `make run` starts a node; `make test` is the default suite (CI).
SWIFT ?= swift

.PHONY: run build release install cluster cluster-down test unit integration soak bench fuzz fuzz-smoke clean robustness image upgrade-test pitr

# Install what is missing, build, and start a durable node on localhost:9000 (./ember-data).
run: release
	./.build/release/emberd --data ./ember-data --port 9000

# The Swift standard library linked in: the binaries run without a toolchain (make install, the
# image's host-built runtime stage; scripts/image.sh builds with the same flags, so neither
# rebuilds what the other built).
RELEASE_FLAGS = -c release --static-swift-stdlib
release:
	./scripts/bootstrap.sh
	$(SWIFT) build $(RELEASE_FLAGS) --product emberd
	$(SWIFT) build $(RELEASE_FLAGS) --product ember

# The binaries on the PATH: emberd and the admin CLI `ember` into $(PREFIX)/bin.
PREFIX ?= /usr/local
install: release
	install -d $(PREFIX)/bin
	install -m 755 .build/release/emberd .build/release/ember $(PREFIX)/bin/
	@echo "installed emberd and ember into $(PREFIX)/bin"

# A 3-node local cluster (mutual TLS on loopback) from the release build, in $(CLUSTER_DIR).
CLUSTER_DIR ?= /tmp/ember-cluster
cluster: release
	./deploy/local-cluster up --nodes 3 --dir $(CLUSTER_DIR)

cluster-down:
	./deploy/local-cluster down --dir $(CLUSTER_DIR)

# The Docker image ember:<version> and ember:latest (scripts/image.sh: the Swift image where it can
# be pulled, else release binaries built here; installs and starts a Docker engine when missing).
image:
	./scripts/image.sh

# A rolling upgrade from the previous release (CHANGELOG.md) to this build under writers and
# listeners, then a downgrade of one node. Builds the previous release first (~10 min once).
upgrade-test: build
	./scripts/upgrade-test.sh

build:
	./scripts/bootstrap.sh
	$(SWIFT) build --build-tests

# The whole default suite: Swift unit tests, then real processes driven by firebase-admin.
# --no-parallel: on 2 cores, CPU-heavy suites (the Raft simulator, storage property tests) would
# occupy the cooperative thread pool and starve the client's timing-based connection tests; run
# one after another the whole Swift suite takes ~40 s.
SWIFT_TEST = $(SWIFT) test --skip-build --no-parallel

test: build
	$(SWIFT_TEST)
	./scripts/integration.sh
	$(MAKE) fuzz-smoke

unit: build
	$(SWIFT_TEST)

integration: build
	./scripts/integration.sh

# Long runs kept out of the default suite: 10,000 Raft simulator seeds and the slow tests.
# The simulator seeds run in release mode (a debug run of the leader-churn profile takes hours).
SIM_RELEASE = EMBER_LIGHT=1 $(SWIFT) test -c release -Xswiftc -enable-testing --scratch-path .build-rel
soak: build
	EMBER_LIGHT=1 $(SWIFT) build -c release -Xswiftc -enable-testing --build-tests --scratch-path .build-rel
	EMBER_SIM_SEEDS=10000 $(SIM_RELEASE) --skip-build --filter SimulationTests
	EMBER_SOAK=1 ./scripts/integration.sh

# Point-in-time recovery (issue 37) with the issue's 20 random instants restored (the default
# suite restores 5).
pitr: build
	EMBER_PITR_INSTANTS=20 ./scripts/integration.sh -k pitr

# The fault campaign (RELIABILITY.md): a 3-node and a 5-node cluster behind the userspace proxy
# under every fault kind, histories checked at the end. ROBUSTNESS_SECONDS per cluster size.
ROBUSTNESS_SECONDS ?= 600
ROBUSTNESS_SEED ?= 1
ROBUSTNESS_OUT ?= .build/robustness
robustness:
	./scripts/bootstrap.sh
	$(SWIFT) build --product emberd
	$(SWIFT) build --product ember
	test -x .venv/bin/pytest || (python3 -m venv .venv && .venv/bin/pip install -q -r Tests/integration/requirements.txt)
	.venv/bin/pytest -q -p no:cacheprovider Tests/robustness/test_checkers.py
	.venv/bin/python Tests/robustness/campaign.py --nodes 3 --seconds $(ROBUSTNESS_SECONDS) --seed $(ROBUSTNESS_SEED) --triggers --out $(ROBUSTNESS_OUT)/3
	.venv/bin/python Tests/robustness/campaign.py --nodes 5 --seconds $(ROBUSTNESS_SECONDS) --seed $(ROBUSTNESS_SEED) --triggers --out $(ROBUSTNESS_OUT)/5

bench:
	./scripts/bootstrap.sh --with-etcd
	$(SWIFT) build -c release --product emberd
	$(SWIFT) build -c release --product ember-bench
	./.build/release/ember-bench --compare-etcd
	./.build/release/ember-bench write --protocol ws --pipeline 64 --clients 16 --compare-etcd
	./.build/release/ember-bench storage --submitters 16 --pipeline 64

# libFuzzer runs of every harness (docs/TESTING.md "Fuzzing"); the default suite only replays the corpus.
FUZZ_TARGETS = JSON Path REST Wire Rules HTTPHead
FUZZ_RUNS ?= 1000000
# 0 lets libFuzzer pick a seed; the smoke run fixes one so a given commit fuzzes the same way in
# CI and on a developer's machine (a crash it finds is then reproducible, not a coin toss).
FUZZ_SEED ?= 0
FUZZ_FLAGS = -c release -Xswiftc -sanitize=fuzzer -Xswiftc -parse-as-library -Xswiftc -DEMBER_FUZZING -Xswiftc -use-ld=lld --scratch-path .build-fuzz
# The default suite's short libFuzzer run of every harness (~3 min, most of it the fuzzer build).
fuzz-smoke:
	$(MAKE) fuzz FUZZ_RUNS=50000 FUZZ_SEED=20261125

fuzz:
	for t in $(FUZZ_TARGETS); do $(SWIFT) build $(FUZZ_FLAGS) --product Fuzz$$t || exit 1; done
	for t in $(FUZZ_TARGETS); do \
	  c=$$(echo $$t | tr A-Z a-z); mkdir -p .build-fuzz/corpus/$$c; \
	  SWIFT_BACKTRACE=enable=no ./.build-fuzz/release/Fuzz$$t -runs=$(FUZZ_RUNS) -seed=$(FUZZ_SEED) -max_len=4096 -print_final_stats=1 \
	    -artifact_prefix=.build-fuzz/crash-$$c- .build-fuzz/corpus/$$c Tests/EmberFuzzTests/Corpus/$$c || exit 1; \
	done

clean:
	rm -rf .build .venv
