#!/usr/bin/env bash
# Make sure a local PostgreSQL answers on 127.0.0.1:$PG_UP_PORT (5432) and
# that we can log in to it as a superuser over TCP, then print that login's
# base URL (postgres://user[:password]@127.0.0.1:PORT, no database) on stdout.
# Everything it does is said on stderr. Used by `make test` and `make demo`.
#
#   - No server: install it from Debian packages, create the cluster with
#     Debian's default authentication, start it.
#   - The server lets postgres in over TCP without a password (trust): use it,
#     change nothing.
#   - It asks for a password (Debian's default: peer on the socket,
#     scram-sha-256 on TCP): through the local socket, as the postgres OS user
#     (runuser as root, sudo otherwise), create the superuser role
#     idemctl_admin with a random password, and keep its URL in
#     bin/pg-admin.url (mode 600) for the next runs. pg_hba.conf is never
#     edited.
#
# PG_UP_PORT and PG_UP_SOCKET_DIR (/var/run/postgresql) name another cluster
# (the tests of this script use a scratch one).
set -euo pipefail
cd "$(dirname "$0")/.."

port=${PG_UP_PORT:-5432}
sockdir=${PG_UP_SOCKET_DIR:-/var/run/postgresql}
saved=${PG_UP_SAVED:-bin/pg-admin.url}
role=idemctl_admin

say() { echo "pg-up: $*" >&2; }
pg_ready() { pg_isready -q -h 127.0.0.1 -p "$port" 2>/dev/null; }
# can_login URL: a superuser login over TCP that needs no prompt.
can_login() {
	[ "$(PGCONNECT_TIMEOUT=5 psql -w "$1/postgres?sslmode=disable" -Atqc "SELECT rolsuper FROM pg_roles WHERE rolname = current_user" 2>/dev/null)" = t ]
}
# as_postgres CMD...: run as the postgres OS user (peer authentication on the socket).
as_postgres() {
	if [ "$(id -un)" = postgres ]; then
		"$@"
	elif [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -u postgres -- "$@"
	else
		say "cannot act as the postgres OS user (not root, no sudo) to create a login; set TEST_DATABASE_URL or IDEMCTL_DEMO_ADMIN_DSN to a superuser URL with its password"
		exit 1
	fi
}

if [ "$port" = 5432 ] && ! pg_ready; then
	if ! command -v pg_isready >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
		say "installing PostgreSQL from Debian packages"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	fi
	if ! pg_ready; then
		version=$(ls /usr/lib/postgresql | sort -V | tail -1)
		if ! pg_lsclusters -h 2>/dev/null | grep -q .; then
			say "creating cluster $version/main (Debian's defaults: peer on the socket, scram-sha-256 on TCP)"
			pg_createcluster "$version" main >/dev/null
		fi
		cluster=$(pg_lsclusters -h | awk 'NR==1 {print $1" "$2}')
		say "starting cluster $cluster"
		# shellcheck disable=SC2086
		pg_ctlcluster --skip-systemctl-redirect $cluster start || true
	fi
fi
for _ in $(seq 1 60); do
	pg_ready && break
	sleep 0.5
done
if ! pg_ready; then
	say "PostgreSQL did not come up on 127.0.0.1:$port; see /var/log/postgresql/"
	exit 1
fi

trusted="postgres://postgres@127.0.0.1:$port"
if can_login "$trusted"; then
	echo "$trusted"
	exit 0
fi
if [ -f "$saved" ] && can_login "$(cat "$saved")"; then
	say "logging in as $role (URL with its password in $saved)"
	cat "$saved"
	exit 0
fi

say "127.0.0.1:$port asks postgres for a password (Debian's default: scram-sha-256 on TCP, peer on the socket)"
password=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
as_postgres psql -h "$sockdir" -p "$port" -d postgres -v ON_ERROR_STOP=1 -q -v role="$role" -v pw="$password" <<'SQL'
SELECT format('CREATE ROLE %I', :'role') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I LOGIN SUPERUSER PASSWORD %L', :'role', :'pw') \gexec
SQL
mkdir -p "$(dirname "$saved")"
(
	umask 077
	echo "postgres://$role:$password@127.0.0.1:$port" >"$saved"
)
if ! can_login "$(cat "$saved")"; then
	say "created role $role, but it cannot log in over TCP on 127.0.0.1:$port (see pg_hba.conf); set TEST_DATABASE_URL or IDEMCTL_DEMO_ADMIN_DSN instead"
	exit 1
fi
say "created the superuser role $role with a random password, through the socket as the postgres OS user (pg_hba.conf unchanged); its URL is in $saved (mode 600); to remove it: sudo -u postgres dropuser $role && rm $saved"
cat "$saved"
