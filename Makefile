# leasegate — see README.md.
GO        ?= go
PKGS      ?= ./...
STATICCHECK = honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: test test-race lint build vet bench

# The test suite: vet, then every package against real embedded etcd
# clusters. `make test` runs without the race detector, so a fresh clone
# does not first build etcd's server for -race; `make test-race` (what CI
# runs) adds it. README.md gives the times of both.
test: vet
	$(GO) test -count=1 -timeout 7m $(PKGS)

test-race: vet
	$(GO) test -race -count=1 -timeout 7m $(PKGS)

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
	SOAK_TIME=$(SOAK_TIME) $(GO) test -count=1 -timeout 0 -run '^TestSoak$$' -v ./internal/robustness
