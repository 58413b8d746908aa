#!/usr/bin/env bash
# Benchmarks, each with its baseline measured in the same run, and the ratios
# the targets in BENCHMARKS.md are stated in. Needs the local PostgreSQL (or
# TEST_DATABASE_URL). Takes a few minutes; run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=benchlib.sh
. scripts/benchlib.sh

# ratio FILE NUM_PATTERN DEN_PATTERN: ops/s (or ns/op inverted) of two lines.
ratio() {
	awk -v num="$2" -v den="$3" '
		function rate(line,   i, n, f) {
			n = split(line, f, /[ \t]+/)
			for (i = 1; i < n; i++) if (f[i+1] == "ops/s") return f[i]
			for (i = 1; i < n; i++) if (f[i+1] == "ns/op") return 1e9 / f[i]
		}
		$1 ~ num { a = rate($0) }
		$1 ~ den { b = rate($0) }
		END { if (a && b) printf "%.2fx", a / b; else printf "n/a" }' "$1"
}

echo "== canonical hash vs encoding/json + sha256 (target >= 3x)"
bench "$out/hash.txt" go test ./idem -run '^$' -bench 'BenchmarkHash' -benchmem -count 1
echo "300 B:  $(ratio "$out/hash.txt" 'canonical_300B' 'encoding_json_300B')"
echo "64 KiB: $(ratio "$out/hash.txt" 'canonical_64KiB' 'encoding_json_64KiB')"

echo
echo "== idem.execute vs the bare effect, from Go (idem.Execute)"
bench "$out/exec.txt" go test ./idem -run '^$' -bench 'BenchmarkExecute$' -benchtime 3s -count 1
for c in 1 8; do
	echo "conns=$c applied/baseline: $(ratio "$out/exec.txt" "applied/conns=$c" "baseline_bare_effect/conns=$c")" \
		"already_applied/baseline: $(ratio "$out/exec.txt" "already_applied/conns=$c" "baseline_bare_effect/conns=$c")"
done

echo
echo "== idem.execute vs the bare effect through pgbench -M simple, median of 3 runs (targets: applied >= 0.9x at 1 connection, already_applied >= 2.0x)"
bench "$out/pgb.txt" go test ./idem -run '^$' -bench 'BenchmarkExecutePgbench$' -benchtime 1x -count 3
for c in 1 8; do
	a=$(median "$out/pgb.txt" "/applied/conns=$c" x_bare)
	r=$(median "$out/pgb.txt" "already_applied/conns=$c" x_bare)
	echo "conns=$c applied/bare: ${a}x [$(check "$a" '>=' 0.9)], already_applied/bare: ${r}x [$(check "$r" '>=' 2.0)]," \
		"WAL per op: bare $(median "$out/pgb.txt" "bare_effect/conns=$c" WAL_B/op) B, applied $(median "$out/pgb.txt" "/applied/conns=$c" WAL_B/op) B"
done

echo
echo "== the executor's own server time per new operation, track_functions over 5,000 calls, median of 3 (target <= 60 us)"
bench "$out/own.txt" go test ./idem -run '^$' -bench 'BenchmarkExecutorServerTime$' -benchtime 1x -count 3
o=$(median "$out/own.txt" 'ExecutorServerTime' own_us)
echo "own: ${o} us [$(check "$o" '<=' 60)], the effect: $(median "$out/own.txt" 'ExecutorServerTime' demo.transfer_effect_self_us) us;" \
	"self: execute $(median "$out/own.txt" 'ExecutorServerTime' idem.execute_self_us) (the request checks, the class, the claim, the body)," \
	"run_effect $(median "$out/own.txt" 'ExecutorServerTime' idem.run_effect_self_us) us (the effect check)"

echo
echo "== the per-call effect check, run_effect with it vs without it, track_functions over 5,000 calls, median of 3 (target <= 5 us)"
bench "$out/check.txt" go test ./idem -run '^$' -bench 'BenchmarkEffectCheckCost$' -benchtime 1x -count 3
k=$(median "$out/check.txt" 'EffectCheckCost' check_us/call)
echo "the inline check: ${k} us [$(check "$k" '<=' 5)]; the previous nested idem.effect_problem call: $(median "$out/check.txt" 'EffectCheckCost' nested_check_us/call) us"

echo
echo "== replays and applied calls on 1,000 day partitions vs 10 (target: both >= 0.9x)"
bench "$out/parts.txt" go test ./idem -run '^$' -bench 'BenchmarkExecutePartitions$' -benchtime 1x -count 1
for p in already_applied applied; do
	x=$(metric "$out/parts.txt" "/$p" x_10)
	echo "$p 1000/10 partitions: ${x}x [$(check "$x" '>=' 0.9)]"
done

for extra in scripts/bench-*.sh; do
	[ -x "$extra" ] || continue
	echo
	echo "== $extra"
	"$extra"
done
