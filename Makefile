.PHONY: build test test-citus demo bench fuzz clean

build:
	go build -o bin/idemctl ./cmd/idemctl

# Every test, against a real PostgreSQL (started and prepared if needed).
test:
	scripts/test.sh

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

fuzz:
	go test ./idem -run '^$$' -fuzz FuzzCanonicalize -fuzztime 60s

clean:
	rm -rf bin
