#!/usr/bin/env bash
# The executor's own cost and the per-call effect check in instructions
# executed by the server (valgrind's callgrind), which the load of other
# work on the machine does not change, unlike any time. A scratch cluster
# gets this checkout's schema (idemctl migrate) and the demo (idemctl demo
# init); each statement then runs N times in a single-user backend, each
# call its own transaction, as an app login, and the script prints
# (instructions of 1,100 calls - of 100 calls) / 1,000 for:
#   bare       the demo effect alone, with the same hash expression
#   execute    idem.execute of a new operation (the installed code)
#   unchecked  the same executor calling the effect with no check
# own = execute - bare, check = execute - unchecked. Needs valgrind and the
# server binaries (pg_config --bindir); as root it runs the server as the
# postgres user. Takes two to three minutes, whatever the load.
#
#	scripts/executor-instructions.sh
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }
bin=$(pg_config --bindir)
idemctl=$(mktemp /tmp/idemctl-instr-bin.XXXXXX)
go build -o "$idemctl" ./cmd/idemctl
chmod 755 "$idemctl"

dir=$(mktemp -d /tmp/idemctl-instr.XXXXXX)
trap 'as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$dir" "$idemctl"' EXIT
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$dir"
as_pg "$bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
as_pg "$bin/pg_ctl" -D "$dir/data" -o "-p 5498 -k $dir -c listen_addresses=" -l "$dir/log" start >/dev/null
lpsql=(psql -q -h "$dir" -p 5498 -U postgres)
"${lpsql[@]}" -c "CREATE DATABASE x" postgres
dsn="host=$dir port=5498 user=postgres dbname=x"
"$idemctl" migrate --dsn "$dsn" >/dev/null
"$idemctl" demo init --dsn "$dsn" >/dev/null
"${lpsql[@]}" -c "CREATE ROLE instr_app LOGIN; GRANT idem_app TO instr_app" x
"${lpsql[@]}" -v ON_ERROR_STOP=1 x <<'SQL'
CREATE SCHEMA instr AUTHORIZATION idem_owner;
SET ROLE idem_owner;
-- idem.execute calling the effect with no check: the check's price.
CREATE FUNCTION instr.run_unchecked(p_op_class text, p_tenant_id text, p_operation_id text, p_payload jsonb, p_effect oid)
RETURNS jsonb LANGUAGE plpgsql AS $b$
BEGIN
    IF p_op_class = 'demo.transfer' THEN RETURN demo.transfer_effect(p_tenant_id, p_operation_id, p_payload); END IF;
    RAISE EXCEPTION 'class % has no SQL effect', p_op_class USING ERRCODE = 'IX004';
END $b$;
DO $do$
DECLARE def text;
BEGIN
    def := pg_get_functiondef('idem.execute(text,text,text,text,text,jsonb)'::regprocedure);
    def := replace(replace(replace(def, 'FUNCTION idem.execute(', 'FUNCTION instr.execute_unchecked('),
                   'execute.', 'execute_unchecked.'), 'idem.run_effect(', 'instr.run_unchecked(');
    EXECUTE def;
END $do$;
GRANT USAGE ON SCHEMA instr TO PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA instr TO PUBLIC;
SQL
as_pg "$bin/pg_ctl" -D "$dir/data" stop >/dev/null

# instructions SQL N: callgrind's total for a single-user backend running SQL N times.
instructions() {
	local in="$dir/in.sql" out="$dir/cg.out"
	{ echo "SET SESSION AUTHORIZATION instr_app"; for _ in $(seq 1 "$2"); do echo "$1"; done; } >"$in"
	chmod 644 "$in"; touch "$out" "$out.err"; chmod 666 "$out" "$out.err"
	as_pg valgrind --tool=callgrind --callgrind-out-file="$out" "$bin/postgres" --single -D "$dir/data" x <"$in" >/dev/null 2>"$out.err"
	grep -o 'Collected : [0-9]*' "$out.err" | awk '{print $3}'
}
per_call() { echo $(( ($(instructions "$1" 1100) - $(instructions "$1" 100)) / 1000 )); }

p=$'\'{"amount":5,"currency":"EUR","from":"a1","to":"b1"}\''
h="'jcs-sha256:' || encode(sha256(convert_to($p, 'UTF8')), 'hex')"
bare=$(per_call "SELECT demo.transfer_effect('bench-1', 'base-' || gen_random_uuid(), ($p)::jsonb), $h;")
exec=$(per_call "SELECT outcome FROM idem.execute('bench-1', 'new-' || gen_random_uuid(), 'demo.transfer', $p, $h);")
unchecked=$(per_call "SELECT outcome FROM instr.execute_unchecked('bench-1', 'u-' || gen_random_uuid(), 'demo.transfer', $p, $h);")
echo "instructions per call (each its own transaction):"
echo "bare $bare execute $exec unchecked $unchecked"
echo "own (execute - bare) $((exec - bare)), own / bare $(awk -v a="$((exec - bare))" -v b="$bare" 'BEGIN { printf "%.2f", a / b }'), check (execute - unchecked) $((exec - unchecked))"
