.PHONY: build sizes test test-citus demo bench fuzz clean fresh-debian

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X github.com/idemctl/idemctl/internal/build.Version=$(VERSION) -X github.com/idemctl/idemctl/internal/build.Commit=$(COMMIT)

build:
	go build -ldflags "$(LDFLAGS)" -o bin/idemctl ./cmd/idemctl

# The largest files and packages of the command line and the console, and
# any past the limits (600 lines a file, 2,000 a package, tests apart).
sizes:
	go test ./internal/cli -run '^TestSourceSizes$$' -count=1 -v

# Every test, against a real PostgreSQL (started and prepared if needed).
test:
	scripts/test.sh $(ARGS)

# The Citus suite on a local cluster (a coordinator and two workers), building
# Citus first when it is missing; skipped loudly where it cannot run.
test-citus:
	scripts/test-citus.sh

# The main job on a local default database.
demo:
	scripts/demo.sh

# Benchmarks of the executor and the canonical hash (see BENCHMARKS.md).
bench:
	scripts/bench.sh

# make demo and make test on a scratch cluster with Debian's default
# authentication (peer on the socket, scram-sha-256 on TCP); needs root.
fresh-debian:
	scripts/fresh-debian.sh

fuzz:
	go test ./idem -run '^$$' -fuzz FuzzCanonicalize -fuzztime 60s

clean:
	rm -rf bin
