# Shared by the benchmark scripts (sourced, not run): the database, a scratch
# directory for outputs, and helpers to read benchmark lines.

if [ -z "${TEST_DATABASE_URL:-}" ]; then
	scripts/pg-up.sh
	export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# bench FILE COMMAND...: runs a benchmark command, keeps its output in FILE
# and prints its result lines; when it fails, prints the end of its output.
bench() {
	local file=$1
	shift
	# Result lines as they come, and the one-time database builds' notices.
	if ! "$@" 2>&1 | tee "$file" | grep --line-buffered -E '^Benchmark|^building'; then
		tail -n 20 "$file" >&2
		echo "FAILED: $*" >&2
		return 1
	fi
}

# metric FILE NAME_PATTERN UNIT: the value before UNIT on the benchmark line.
metric() {
	awk -v name="$2" -v unit="$3" '
		$1 ~ name { for (i = 2; i < NF; i++) if ($(i+1) == unit) { print $i; exit } }' "$1"
}
# median FILE NAME_PATTERN UNIT: the median of that value over every matching
# line (a benchmark run with -count N prints N lines).
median() {
	awk -v name="$2" -v unit="$3" '
		$1 ~ name { for (i = 2; i < NF; i++) if ($(i+1) == unit) v[n++] = $i }
		END {
			if (n == 0) exit
			for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			print (n % 2) ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2 }' "$1"
}
# check VALUE OP TARGET: "ok" or "MISSED".
check() {
	awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN {
		if (v == "") { print "n/a"; exit }
		ok = (op == ">=") ? v >= t : v <= t
		print ok ? "ok" : "MISSED" }'
}
