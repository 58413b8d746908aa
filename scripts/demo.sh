#!/usr/bin/env bash
# The main job on a local default database, as the roles a team would use:
# the admin migrates and installs the demo ledger, maps two operators to
# persons, then alice (an operator) resolves a batch of ambiguous operations,
# alice plans a purge that bob approves (four eyes: two persons), and an
# auditor verifies the audit chain.
#
# It uses its own local database, idemctl_demo, on the local PostgreSQL
# (started or created if needed), never IDEMCTL_DSN; IDEMCTL_DEMO_ADMIN_DSN
# names another admin connection explicitly. Connections are written to
# bin/demo.pg_service.conf (mode 600, passwords included), so that every
# command it prints can be pasted as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

make --no-print-directory build # with the version flags: idemctl version names the commit

admin=${IDEMCTL_DEMO_ADMIN_DSN:-}
if [ -z "$admin" ]; then
	base=$(scripts/pg-up.sh)
	server="$base/postgres?sslmode=disable"
	psql -w "$server" -Atqc "SELECT 1 FROM pg_database WHERE datname = 'idemctl_demo'" | grep -q 1 ||
		psql -w "$server" -qc "CREATE DATABASE idemctl_demo"
	admin="$base/idemctl_demo?sslmode=disable"
	# The local demo database is ours: if another idemctl made it with a
	# schema this one cannot take, start it afresh.
	if ! bin/idemctl migrate --status -o json --dsn "$admin" >/dev/null 2>&1 ||
		bin/idemctl migrate --status -o json --dsn "$admin" | grep -q '"state":"DRIFTED"'; then
		echo "demo: idemctl_demo was made by another version of idemctl; recreating it" >&2
		psql -w "$server" -qc "DROP DATABASE idemctl_demo WITH (FORCE)" -c "CREATE DATABASE idemctl_demo"
	fi
fi
# Where the demo's logins connect: the admin connection's host and port.
demo_host=$(sed -n 's#^[a-z]*://[^@]*@\([^:/]*\).*#\1#p' <<<"$admin")
demo_port=$(sed -n 's#^[a-z]*://[^@]*@[^:/]*:\([0-9]*\).*#\1#p' <<<"$admin")
demo_db=$(sed -n 's#^[a-z]*://[^/]*/\([^?]*\).*#\1#p' <<<"$admin")
: "${demo_host:=127.0.0.1}" "${demo_port:=5432}" "${demo_db:=idemctl_demo}"
echo "demo: database $demo_db on $demo_host:$demo_port (never IDEMCTL_DSN)" >&2

echo "== as the admin: idemctl migrate, idemctl demo init, logins and persons"
if ! bin/idemctl migrate -o table --dsn "$admin"; then
	echo "demo: idemctl_demo holds a schema this idemctl cannot take; recreating it" >&2
	psql "$admin" -qc "DROP SCHEMA IF EXISTS idem CASCADE; DROP SCHEMA IF EXISTS demo CASCADE"
	bin/idemctl migrate -o table --dsn "$admin"
fi
bin/idemctl demo init --dsn "$admin"
# Demo logins, one per kind of user (the group roles come from migrate).
psql "$admin" -v ON_ERROR_STOP=1 -q <<'SQL'
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT * FROM (VALUES ('idemctl_demo_alice', 'idem_operator'), ('idemctl_demo_bob', 'idem_operator'),
                                   ('idemctl_demo_auditor', 'idem_auditor'), ('idemctl_demo_app', 'idem_app')) v(login, grp)
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r.login) THEN
            EXECUTE format('CREATE ROLE %I LOGIN PASSWORD %L', r.login, r.login || '-demo-password');
        END IF;
        EXECUTE format('GRANT %I TO %I', r.grp, r.login);
    END LOOP;
END $$;
SQL
for p in alice bob; do
	bin/idemctl person list -o json --dsn "$admin" | grep -q "\"login\":\"idemctl_demo_$p\"" ||
		bin/idemctl person add "$p" --login "idemctl_demo_$p" --dsn "$admin"
done

services=bin/demo.pg_service.conf
umask 077
{
	for who in alice bob auditor app; do
		printf '[demo-%s]\nhost=%s\nport=%s\ndbname=%s\nuser=idemctl_demo_%s\npassword=idemctl_demo_%s-demo-password\nsslmode=disable\n\n' \
			"$who" "$demo_host" "$demo_port" "$demo_db" "$who" "$who"
	done
} >"$services"
umask 022
as() { echo "service=demo-$1 servicefile=$services"; }

echo
echo "== as alice (an operator): one transfer, its duplicate, a conflicting retry"
bin/idemctl demo run -o table --dsn "$(as alice)" --operator alice

# The main job: a batch of ambiguous operations, resolved; then the same batch
# again, as after a crash, with one retry that changed its amount.
batch=$(mktemp)
trap 'rm -f "$batch"' EXIT
op="batch-$(date +%s)"
for n in 1 2 3; do
	printf '{"tenant":"demo","operation_id":"%s-%d","class":"demo.transfer","payload":{"from":"alice","to":"carol","amount":%d00,"currency":"EUR"}}\n' "$op" "$n" "$n"
done >"$batch"
echo
echo "== idemctl resolve --file batch.ndjson --dry-run   (nothing is written)"
bin/idemctl resolve --file "$batch" --dry-run -o table --dsn "$(as alice)" --operator alice
echo
echo "== idemctl resolve --file batch.ndjson"
bin/idemctl resolve --file "$batch" -o table --dsn "$(as alice)" --operator alice
printf '{"tenant":"demo","operation_id":"%s-2","class":"demo.transfer","payload":{"from":"alice","to":"carol","amount":250,"currency":"EUR"}}\n' "$op" >>"$batch"
echo
echo "== the same batch again, plus a retry of $op-2 with another amount (exit code 3: a conflict)"
bin/idemctl resolve --file "$batch" -o table --dsn "$(as alice)" --operator alice ||
	echo "(exit code $?: the conflicting retry was quarantined, nothing ran)"

echo
echo "== re-drive: demo.transfer_app's effect lives in a service (it charges a payment provider);"
echo "   resolve sends the missing ones through that service, with their own identity, and reads the answer on the primary"
serve_log=$(mktemp)
trap 'rm -f "$batch" "$serve_log"; [ -n "${serve_pid:-}" ] && kill "$serve_pid" 2>/dev/null || true' EXIT
bin/idemctl demo serve --dsn "$(as app)" --listen 127.0.0.1:0 2>"$serve_log" &
serve_pid=$!
url=
for _ in $(seq 100); do
	url=$(sed -n 's/^demo serve: listening on \(http:[^ ]*\)$/\1/p' "$serve_log")
	[ -n "$url" ] && break
	kill -0 "$serve_pid" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$url" ]; then
	cat "$serve_log" >&2
	echo "demo: idemctl demo serve did not start" >&2
	exit 1
fi
echo "idemctl demo serve (as the app login) listens on $url"
bin/idemctl class set demo.transfer_app --redrive http --url "$url" --downstream-idempotent -o table \
	--dsn "$(as alice)" --operator alice
app_batch=$(mktemp)
trap 'rm -f "$batch" "$serve_log" "$app_batch"; [ -n "${serve_pid:-}" ] && kill "$serve_pid" 2>/dev/null || true' EXIT
for n in 1 2 3; do
	printf '{"tenant":"demo","operation_id":"%s-app-%d","class":"demo.transfer_app","payload":{"from":"alice","to":"dave","amount":%d00,"currency":"EUR"}}\n' "$op" "$n" "$n"
done >"$app_batch"
bin/idemctl resolve --file "$app_batch" --dry-run -o table --dsn "$(as alice)" --operator alice
bin/idemctl resolve --file "$app_batch" -o table --dsn "$(as alice)" --operator alice
echo "(again: each is found on the primary, nothing is sent)"
bin/idemctl resolve --file "$app_batch" -o table --dsn "$(as alice)" --operator alice
kill "$serve_pid" 2>/dev/null || true
wait "$serve_pid" 2>/dev/null || true
serve_pid=

echo
echo "== four eyes: alice plans a purge of demo.transfer, alice may not approve it, bob does"
echo "   (the demo has no topic, DLQ or archive that could replay it: alice says so with --accept-unbounded-horizon)"
plan=$(bin/idemctl horizon plan --class demo.transfer --before 1h --contract DEMO-RETENTION-1 --accept-unbounded-horizon -o json \
	--dsn "$(as alice)" --operator alice | sed -n 's/.*"id":\([0-9]*\).*/\1/p' | head -1)
echo "plan #$plan recorded by alice"
bin/idemctl horizon approve "$plan" --yes --dsn "$(as alice)" --operator not-alice ||
	echo "(exit code $?: the same person, whatever --operator says)"
bin/idemctl horizon approve "$plan" --yes -o table --dsn "$(as bob)" --operator bob
bin/idemctl horizon purge "$plan" --yes -o table --dsn "$(as alice)" --operator alice

echo
echo "== as the auditor: the audit chain, recomputed outside the database"
bin/idemctl audit verify -o table --dsn "$(as auditor)"

cat <<HINTS

Try next (each command works pasted as it is, from this directory):
  bin/idemctl quarantine list --dsn '$(as alice)'
  bin/idemctl inspect --tenant demo --op $op-2 --dsn '$(as alice)'
  bin/idemctl redrive list --dsn '$(as alice)'
  bin/idemctl audit list --dsn '$(as auditor)'
  bin/idemctl tui --dsn '$(as alice)' --operator alice
HINTS
