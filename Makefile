# leasegate — see README.md.
GO        ?= go
PKGS      ?= ./...
STATICCHECK = honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: test lint build vet bench

# The test suite: vet, then every package under the race detector. It runs
# real embedded etcd clusters, so it takes a few minutes on 2 cores.
test: vet
	$(GO) test -race -count=1 -timeout 7m $(PKGS)

vet:
	$(GO) vet $(PKGS)

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: unformatted:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) $(PKGS)

build:
	mkdir -p bin
	$(GO) build -o bin/leasegate ./cli/leasegate

# Benchmarks (never part of `make test`): the Go benchmarks of the client's
# hot paths, then `leasegate bench` on an embedded etcd with fsync on. See
# docs/performance.md for what the figures mean.
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	$(GO) run ./cli/leasegate bench
