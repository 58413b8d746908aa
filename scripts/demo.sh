#!/usr/bin/env bash
# The main job on a local default database, as the roles a team would use:
# the admin migrates and installs the demo ledger, maps two operators to
# persons, then alice (an operator) resolves a batch of ambiguous operations,
# alice plans a purge that bob approves (four eyes: two persons), and an
# auditor verifies the audit chain.
#
# It uses its own local database, idemctl_demo, on the local PostgreSQL
# (started or created if needed), never IDEMCTL_DSN; IDEMCTL_DEMO_ADMIN_DSN
# names another admin connection explicitly. The schema's roles and the
# demo's logins are its own, named after its database (DB_role_owner, ...,
# DB_alice, ...), never the default idem_* roles other databases of the
# cluster may use; each run gives the logins new random passwords, kept only
# in bin/demo.pg_service.conf (mode 600), so that every command it prints can
# be pasted as it is. It prints how to remove them.
set -euo pipefail
cd "$(dirname "$0")/.."

make --no-print-directory build # with the version flags: idemctl version names the commit

# The auditor's anchor for the demo database: the demo's own, dropped with
# the database when the demo creates it again (another database, whose log
# starts afresh: audit verify compares a new identity at the same address
# with the entry kept there, and would report that log cut).
anchors=bin/demo.audit-anchors.json
admin=${IDEMCTL_DEMO_ADMIN_DSN:-}
if [ -z "$admin" ]; then
	base=$(scripts/pg-up.sh)
	server="$base/postgres?sslmode=disable"
	psql -w "$server" -Atqc "SELECT 1 FROM pg_database WHERE datname = 'idemctl_demo'" | grep -q 1 ||
		{ psql -w "$server" -qc "CREATE DATABASE idemctl_demo" && rm -f "$anchors"; }
	admin="$base/idemctl_demo?sslmode=disable"
	# The local demo database is ours: if another idemctl made it with a
	# schema this one cannot take, start it afresh.
	prefix=idemctl_demo_role # as below: the demo's roles are named after its database
	if ! bin/idemctl migrate --status -o json --role-prefix "$prefix" --dsn "$admin" >/dev/null 2>&1 ||
		bin/idemctl migrate --status -o json --role-prefix "$prefix" --dsn "$admin" | grep '"state":"DRIFTED"' >/dev/null; then
		echo "demo: idemctl_demo was made by another version of idemctl; recreating it" >&2
		psql -w "$server" -qc "DROP DATABASE idemctl_demo WITH (FORCE)" -c "CREATE DATABASE idemctl_demo"
		rm -f "$anchors"
	fi
fi
# Where the demo's logins connect: the admin connection's host and port.
demo_host=$(sed -n 's#^[a-z]*://[^@]*@\([^:/]*\).*#\1#p' <<<"$admin")
demo_port=$(sed -n 's#^[a-z]*://[^@]*@[^:/]*:\([0-9]*\).*#\1#p' <<<"$admin")
demo_db=$(sed -n 's#^[a-z]*://[^/]*/\([^?]*\).*#\1#p' <<<"$admin")
: "${demo_host:=127.0.0.1}" "${demo_port:=5432}" "${demo_db:=idemctl_demo}"
echo "demo: database $demo_db on $demo_host:$demo_port (never IDEMCTL_DSN)" >&2
# Roles of the demo's own: the schema's group roles (migrate --role-prefix)
# and one login per kind of user, named after the database.
prefix="${demo_db}_role"
login() { echo "${demo_db}_$1"; }

echo "== as the admin: idemctl migrate, idemctl demo init, logins and persons"
if ! bin/idemctl migrate -o table --role-prefix "$prefix" --dsn "$admin"; then
	echo "demo: $demo_db holds a schema this idemctl cannot take (or one owned by other roles); recreating it" >&2
	psql "$admin" -qc "DROP SCHEMA IF EXISTS idem CASCADE; DROP SCHEMA IF EXISTS demo CASCADE"
	bin/idemctl migrate -o table --role-prefix "$prefix" --dsn "$admin"
fi
bin/idemctl demo init --dsn "$admin"
# Demo logins, one per kind of user (the group roles come from migrate),
# each run with a new random password that only the service file keeps. The
# SQL goes to psql on its standard input, never on a command line.
services=bin/demo.pg_service.conf
rm -f "$services"
(
	umask 077
	for who in alice:operator bob:operator auditor:auditor app:app; do
		name=$(login "${who%%:*}")
		pw=$(od -An -tx1 -N18 /dev/urandom | tr -d ' \n')
		printf "SELECT format('CREATE ROLE %%I LOGIN', '%s') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '%s')\n\\gexec\n" "$name" "$name"
		printf "ALTER ROLE %s LOGIN PASSWORD '%s';\nGRANT %s_%s TO %s;\n" "$name" "$pw" "$prefix" "${who#*:}" "$name"
		# Any other membership (the default idem_* roles of an older demo) goes.
		printf "SELECT format('REVOKE %%I FROM %%I', r.rolname, '%s') FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid WHERE m.member = '%s'::regrole AND r.rolname <> '%s_%s'\n\\gexec\n" \
			"$name" "$name" "$prefix" "${who#*:}"
		printf '[demo-%s]\nhost=%s\nport=%s\ndbname=%s\nuser=%s\npassword=%s\nsslmode=disable\n\n' \
			"${who%%:*}" "$demo_host" "$demo_port" "$demo_db" "$name" "$pw" >>"$services"
	done | psql "$admin" -v ON_ERROR_STOP=1 -q
)
chmod 600 "$services"
for p in alice bob; do
	bin/idemctl person list -o json --dsn "$admin" | grep "\"login\":\"$(login "$p")\"" >/dev/null ||
		bin/idemctl person add "$p" --login "$(login "$p")" --dsn "$admin"
done

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

# What the README's walk-through uses: charge-42 applied, a retry of
# charge-42 that changed its amount (quarantined), and the ambiguous list
# bin/ambiguous.ndjson (charge-42 as applied, -43 and -44 not applied: the
# README's dry run says 1 already_applied, 2 would_apply).
echo
echo "== for the README: demo/charge-42 applied, a retry of charge-42 with another amount, bin/ambiguous.ndjson"
charge() { printf '{"tenant":"demo","operation_id":"charge-%d","class":"demo.transfer","payload":{"from":"alice","to":"carol","amount":%d,"currency":"EUR"}}\n' "$1" "$2"; }
charge 42 4200 | bin/idemctl resolve --file - -o table --dsn "$(as alice)" --operator alice
charge 42 4250 | bin/idemctl resolve --file - -o table --dsn "$(as alice)" --operator alice ||
	echo "(exit code $?: the retry of charge-42 was quarantined, nothing ran)"
{ charge 42 4200; charge 43 4300; charge 44 4400; } >bin/ambiguous.ndjson

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
bin/idemctl audit verify -o table --anchor-file "$anchors" --dsn "$(as auditor)"

# The admin connection as printed: never with its password.
shown_admin=$(sed 's#^\([a-z]*://[^:@/]*\):[^@]*@#\1@#' <<<"$admin")
password_hint=""
if [ "$shown_admin" != "$admin" ]; then
	password_hint="
(the admin's password is not printed: give it with PGPASSWORD, or as scripts/pg-up.sh said)"
fi
cat <<HINTS

Try next (each command works pasted as it is, from this directory):
  bin/idemctl quarantine list --dsn '$(as alice)'
  bin/idemctl resolve --file bin/ambiguous.ndjson --dry-run --dsn '$(as alice)'   # the README's walk-through
  bin/idemctl inspect --tenant demo --op $op-2 --dsn '$(as alice)'
  bin/idemctl redrive list --dsn '$(as alice)'
  bin/idemctl audit list --dsn '$(as auditor)'
  bin/idemctl tui --dsn '$(as alice)' --operator alice

The demo's roles are its own ($(login alice), $(login bob), $(login auditor), $(login app) and
${prefix}_owner, _app, _operator, _auditor); to remove them with the demo:
  psql '$shown_admin' -c 'DROP SCHEMA demo CASCADE' -c 'DROP SCHEMA idem CASCADE'
  psql '$shown_admin' -c 'DROP OWNED BY $(login alice), $(login bob), $(login auditor), $(login app), ${prefix}_owner, ${prefix}_app, ${prefix}_operator, ${prefix}_auditor, idem_demo'
  psql '$shown_admin' -c 'DROP ROLE $(login alice), $(login bob), $(login auditor), $(login app), ${prefix}_app, ${prefix}_operator, ${prefix}_auditor, ${prefix}_owner'
  rm -f $services
(or drop the database $demo_db first, then run the DROP ROLE line against another database)
The ledger's owner idem_demo is one role for every demo of the cluster: drop it last, once no
database still holds a demo (DROP ROLE refuses while one does, and changes nothing):
  psql '$shown_admin' -c 'DROP ROLE idem_demo'$password_hint
HINTS
