# Ember's single entry point. `make run` starts a node; `make test` is the default suite (CI).
SWIFT ?= swift

.PHONY: run build release test unit integration soak bench clean

# Install what is missing, build, and start a durable node on localhost:9000 (./ember-data).
run: release
	./.build/release/emberd --data ./ember-data --port 9000

release:
	./scripts/bootstrap.sh
	$(SWIFT) build -c release --product emberd
	$(SWIFT) build -c release --product ember

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

unit: build
	$(SWIFT_TEST)

integration: build
	./scripts/integration.sh

# Long runs kept out of the default suite: 10,000 Raft simulator seeds and the slow tests.
soak: build
	EMBER_SIM_SEEDS=10000 $(SWIFT_TEST) --filter EmberRaftTests
	EMBER_SOAK=1 ./scripts/integration.sh

bench:
	./scripts/bootstrap.sh --with-etcd
	$(SWIFT) build -c release --product emberd
	$(SWIFT) build -c release --product ember-bench
	./.build/release/ember-bench --compare-etcd

clean:
	rm -rf .build .venv
