#!/usr/bin/env bash
# Re-drive throughput: resolve re-driving absent operations through the
# reference service (idemctl demo serve's handler) vs calling that service
# directly, at the same concurrency, alternated in one run (target: >= 0.8x).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=benchlib.sh
. scripts/benchlib.sh

echo "== re-drive through the reference service vs calling it directly, 8 in flight"
bench "$out/redrive.txt" go test ./recovery -run '^$' -bench 'BenchmarkRedrive$' -benchtime 4000x -count 3
for r in $(awk '{ for (i = 2; i < NF; i++) if ($(i+1) == "x_direct") print $i }' "$out/redrive.txt"); do
	echo "re-drive / direct: ${r}x  [>= 0.8x: $(check "$r" '>=' 0.8)]"
done
