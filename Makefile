.PHONY: build test demo bench fuzz clean

build:
	go build -o bin/idemctl ./cmd/idemctl

# Every test, against a real PostgreSQL (started and prepared if needed).
test:
	scripts/test.sh

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
