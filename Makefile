# leasegate — see README.md.
GO        ?= go
PKGS      ?= ./...
STATICCHECK = honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: test test-race lint build vet bench drill pictures

# The test suite: vet, then every package against real embedded etcd
# clusters. `make test` runs without the race detector, so a fresh clone
# does not first build etcd's server for -race; `make test-race` (what CI
# runs) adds it. README.md gives the times of both. The suite spends most
# of its time waiting on real leases and timeouts (a warm run keeps about
# 0.7 of the two CPUs busy), so `make test` runs four package binaries at
# once (TEST_P): 2 min 55 s warm against 4 min 55 s at go test's default of
# one per CPU. test-race keeps the default: the race detector is CPU-bound,
# and its package binaries get 15 min each (the drill, cli and console
# packages run real processes and a browser, several times slower under it).
TEST_P ?= 4
test: vet provider-note typescript
	$(GO) test -p $(TEST_P) -count=1 -timeout 7m $(PKGS)

test-race: vet provider-note typescript
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

vet:
	$(GO) vet $(PKGS)

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: unformatted:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) $(PKGS)

# -buildvcs=auto records the commit in the binary (leasegate version) when
# built from a git clone, even where GOFLAGS turns that off.
build:
	mkdir -p bin
	$(GO) build -buildvcs=auto -o bin/leasegate ./cli/leasegate

# Headless Chromium for the tests that look at what a person sees
# (testsupport/browser: the README's pictures, the console): Debian's
# chromium and the DejaVu fonts the pictures are measured in, and
# libnss3-tools (certutil, pk12util: a client certificate for Chromium to
# present, browser.ClientCertificate). `make
# browser` installs them when missing — that needs root (apt-get). `make
# test` runs the browser tests when chromium is installed and skips them
# with one line naming this target when not; LEASEGATE_REQUIRE_BROWSER=1
# (set by .ci/run) makes them fail instead.
BROWSER_PKGS = chromium fonts-dejavu-core libnss3-tools
HAVE_BROWSER = command -v chromium >/dev/null && command -v pk12util >/dev/null && [ -f /usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf ]
.PHONY: browser
browser:
	@if $(HAVE_BROWSER); then \
		echo "browser: $(BROWSER_PKGS) installed"; \
	elif [ "$$(id -u)" != 0 ]; then \
		echo "browser: installing $(BROWSER_PKGS) needs root: sudo make browser"; exit 1; \
	else \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -q && apt-get install -y -q --no-install-recommends $(BROWSER_PKGS); \
	fi

# The Temporal integration (temporal/, and the example examples/temporal/,
# each a Go module of its own so the core module does not inherit
# Temporal's dependencies). Not part of `make test`: its tests run a real
# Temporal server in-process (go.temporal.io/server/temporaltest, SQLite),
# whose first build takes several minutes (README.md gives the time). Under
# the race detector. TEMPORAL_CHAOS sets how long the chaos
# test's faults last (default 20 s); `make soak-temporal` runs it for 5 min.
# temporal/drillworker's test builds cmd/drillworker and drills it with
# `leasegate drill --worker`'s machinery (4 trials, one Temporal server).
TEMPORAL_CHAOS ?=
.PHONY: test-temporal soak-temporal
test-temporal:
	cd temporal && $(GO) vet ./... && LEASEGATE_TEMPORAL_CHAOS=$(TEMPORAL_CHAOS) $(GO) test -race -count=1 -timeout 15m ./...
	cd examples/temporal && $(GO) vet ./... && $(GO) build -o /dev/null .

soak-temporal:
	cd temporal && LEASEGATE_TEMPORAL_CHAOS=5m $(GO) test -race -count=1 -timeout 30m -run Chaos -v ./incident

# The failover drill: build, then run `leasegate drill` on an embedded etcd
# (seed-000 fixtures, then the seed-003 failover under faults, naive vs
# fenced; about a minute on 2 cores). DRILL_FLAGS passes flags, e.g.
# make drill DRILL_FLAGS='--trials 10000'. See docs/drill.md.
DRILL_FLAGS ?=
drill: build
	./bin/leasegate drill $(DRILL_FLAGS)

# Real providers (testsupport/realprov, adapters/...): a PostgreSQL 15
# primary and streaming standby, BIND 9 named with a TSIG-updatable zone,
# nsupdate. `make providers` installs the Debian packages when they are
# missing — that needs root (apt-get); `make test-providers` then runs the
# reference adapters' tests and the short real-provider drill on them,
# failing (not skipping) if a server is absent. `make test` runs the same tests when the servers are installed
# and skips them with one line naming this target when not.
PROVIDER_PKGS = postgresql bind9 bind9-dnsutils
HAVE_PROVIDERS = [ -x /usr/lib/postgresql/15/bin/initdb ] && [ -x /usr/sbin/named ] && command -v nsupdate >/dev/null
.PHONY: providers test-providers provider-note drill-real
provider-note:
	@$(HAVE_PROVIDERS) || echo "real-provider tests (adapters/, testsupport/realprov, the real-provider drill) skipped: servers absent; run make test-providers"

# Python 3 (Debian's python3) for the Python example workers' tests
# (gateway/python_test.go; drill/worker_test.go, which drills
# examples/python/recovery_worker.py and naive_recovery_worker.py):
# installed when missing; .ci/run requires it (LEASEGATE_REQUIRE_PYTHON).
HAVE_PYTHON = command -v python3 >/dev/null 2>&1
.PHONY: python
python:
	@if $(HAVE_PYTHON); then \
		echo "python: python3 installed"; \
	elif [ "$$(id -u)" != 0 ]; then \
		echo "python: installing python3 needs root: sudo make python"; exit 1; \
	else \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -q && apt-get install -y -q --no-install-recommends python3; \
	fi

providers:
	@if $(HAVE_PROVIDERS); then \
		echo "providers: $(PROVIDER_PKGS) installed"; \
	elif [ "$$(id -u)" != 0 ]; then \
		echo "providers: installing $(PROVIDER_PKGS) needs root: sudo make providers"; exit 1; \
	else \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -q && apt-get install -y -q --no-install-recommends $(PROVIDER_PKGS); \
	fi

test-providers: providers
	LEASEGATE_REQUIRE_PROVIDERS=1 $(GO) test -count=1 -timeout 10m ./testsupport/realprov ./adapters/...
	LEASEGATE_REQUIRE_PROVIDERS=1 $(GO) test -count=1 -timeout 10m -run 'RealProviders|RealFencedWorkers|WatchSeesEveryChange' ./drill ./cli

# Seed 003's failover on the real servers: `leasegate drill --providers
# real` — the drill's seeded trials (20 per design; DRILL_FLAGS passes
# flags, e.g. make drill-real DRILL_FLAGS='--trials 50') and its graders,
# with a PostgreSQL 15 primary and streaming standby as the topology and
# BIND 9 as the traffic record, under the faults that are real there (the
# promote's connection cut after send, a worker paused in a dispatch
# window, an operator's nsupdate, the standby shut down at dispatch).
# Installs the providers first when missing, which needs root (apt-get):
# sudo make drill-real. See docs/drill.md.
drill-real: providers build
	./bin/leasegate drill --providers real $(DRILL_FLAGS)

# The pictures of the README: the incident scenario drawn in both designs
# (docs/img/incident-naive.svg, docs/img/incident-fenced.svg).
# `go test ./drill -run TestPicturesAreCurrent` fails when they are stale.
pictures: build
	./bin/leasegate drill --scenario incident --svg docs/img/incident.svg > /dev/null

# Benchmarks (never part of `make test`): the Go benchmarks of the client's
# hot paths, then `leasegate bench` on an embedded etcd with fsync on. See
# docs/performance.md for what the figures mean.
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	$(GO) run ./cli/leasegate bench

# Randomized fault scenarios on a three-member cluster for SOAK_TIME
# (default 5m), printing operations, faults by kind, unknown outcomes,
# linearizability verdicts and violations (which must be 0).
SOAK_TIME ?= 5m
.PHONY: soak
soak:
	SOAK_TIME=$(SOAK_TIME) $(GO) test -count=1 -timeout 0 -run '^TestSoak$$' -v ./testsupport/robustness

# Fuzzing: each target explores for FUZZTIME (go test -fuzz runs one target
# at a time). Their seed corpora (f.Add and testdata/fuzz/) run in every
# plain `go test`, so `make test` replays them; a failing input the fuzzer
# finds is written to testdata/fuzz/<target>/ — commit it with the fix.
FUZZTIME ?= 20s
FUZZ_TARGETS = coordinator:FuzzTaskKeys coordinator:FuzzParseKey coordinator:FuzzLeaseID coordinator:FuzzGrantJSON coordinator:FuzzLabel \
	fencedtxn:FuzzDigest ledger:FuzzCanonical ledger:FuzzDecodeRecord \
	cli:FuzzParseGrant cli:FuzzTTL cli:FuzzEndpoint

.PHONY: fuzz
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; echo "fuzz $$pkg $$fn for $(FUZZTIME)"; \
		$(GO) test ./$$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME); \
	done

# Retention soak (never part of `make test`): SOAK_OPS commits on 256 tasks
# with a 2 s retention window, collected every second, printing the key
# count and etcd's DB size; the figures are in docs/reliability.md.
SOAK_OPS ?= 100000
.PHONY: soak-retention
soak-retention:
	$(GO) run ./tools/retentionsoak -ops $(SOAK_OPS)

# Mutation score (never part of `make test`): each hand-written mutation of
# tools/mutate/mutations.go applied to a copy of the tree, its tests
# run, killed / survived reported. The first list (120 mutations) took 19
# minutes on two cores when it had 95; the independent list (indep/, 194,
# whole packages per mutant) takes hours. MUTATE_FLAGS passes flags, e.g.
# make mutate MUTATE_FLAGS='-only ^claim/'. See docs/reliability.md.
MUTATE_FLAGS ?=
.PHONY: mutate
mutate:
	nice -n 19 $(GO) run ./tools/mutate $(MUTATE_FLAGS)

# The API (api/leasegate/v1): generate the committed Go code from the
# protobuf with pinned tools (buf by version through go run; protoc-gen-go
# and protoc-gen-connect-go from go.mod's tool block, run as local plugins:
# no remote plugin). api-lint checks the protobuf; api-breaking compares it
# with main's. See docs/gateway.md.
BUF = $(GO) run github.com/bufbuild/buf/cmd/buf@v1.75.0
.PHONY: generate api-lint api-breaking
generate: typescript-deps
	$(BUF) generate
	$(BUF) lint

api-lint:
	$(BUF) lint

# The TypeScript client (clients/typescript, docs/clients.md): npm ci
# installs the packages pinned in its package-lock.json from the npm
# registry (once, until the lock changes), tsc builds it into dist/.
# make test runs TestTheTypeScriptWorker (cli/) on the build under Node;
# where npm is absent this target says so and the test skips with one line
# naming it (CI sets LEASEGATE_REQUIRE_NODE, so there it fails instead).
# make generate runs the package's protoc-gen-es, so it installs them too.
TS_DIR = clients/typescript
.PHONY: typescript typescript-deps
typescript: typescript-deps
	@if command -v npm >/dev/null; then cd $(TS_DIR) && npx --no-install tsc -p tsconfig.json; fi

typescript-deps:
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory $(TS_DIR)/node_modules/.package-lock.json; \
	else echo "typescript client skipped: npm absent (Node 20 or later builds it: make typescript)"; fi

$(TS_DIR)/node_modules/.package-lock.json: $(TS_DIR)/package-lock.json $(TS_DIR)/package.json
	cd $(TS_DIR) && npm ci --no-audit --no-fund --loglevel=error

api-breaking:
	$(BUF) breaking --against '.git#branch=main'
