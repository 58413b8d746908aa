#!/usr/bin/env bash
# A local Citus cluster for tests and demos: one coordinator and N workers, each
# its own PostgreSQL 15 instance (data directory, port, socket directory) under
# BASEDIR, all with the database "idemctl" and the citus extension.
#
#   scripts/citus-cluster.sh up     [BASEDIR] [--workers N]  # start (or resume) a cluster
#   scripts/citus-cluster.sh status [BASEDIR]                # print its DSNs and node states
#   scripts/citus-cluster.sh down   [BASEDIR]                # stop every node, remove BASEDIR
#   scripts/citus-cluster.sh add-worker   [BASEDIR]          # one more worker (rebalance tests)
#   scripts/citus-cluster.sh kill-worker  I [BASEDIR]        # SIGKILL worker I and its backends
#   scripts/citus-cluster.sh stop-worker  I [BASEDIR]        # fast shutdown of worker I
#   scripts/citus-cluster.sh start-worker I [BASEDIR]        # start worker I (crash recovery after a kill)
#   scripts/citus-cluster.sh reap                            # stop clusters whose owner process died
#
# BASEDIR defaults to $CITUS_BASEDIR, else /tmp/idemctl-citus. Workers are
# numbered from 1. Ports are free ones picked at random, or fixed with
# CITUS_PORT_BASE=P (coordinator P, worker I on P+I). CITUS_EXTRA_CONF adds
# postgresql.conf lines to every node. CITUS_OWNER_PID names the process that
# owns the cluster, for `reap`.
#
# up, status and add-worker print KEY=VALUE lines on stdout for a test harness
# (CITUS_COORDINATOR_URL, CITUS_WORKER_<I>_URL, CITUS_WORKER_URLS comma-separated,
# ...) that a shell can source; progress goes to stderr.
# Exit codes: 0 ok, 1 error, 2 usage or no cluster in BASEDIR, 3 Citus is not
# available here (neither installed nor installable): callers skip loudly.
#
# The nodes run with fsync = off: they survive SIGKILL of any process (what the
# tests do) but not a power cut. As root, the servers run as the postgres user.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
pg_config=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
database=idemctl
marker=.idemctl-citus-cluster

say() { echo "citus-cluster: $*" >&2; }
die() { say "$*"; exit 1; }

unavailable() {
	{
		echo "################################################################"
		echo "citus-cluster: Citus NOT AVAILABLE: $*"
		echo "citus-cluster: Citus tests will be SKIPPED"
		echo "################################################################"
	} >&2
	exit 3
}

# as_pg runs a server binary as the postgres OS user when we are root:
# PostgreSQL refuses to run as root.
as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

# ensure_citus makes sure PostgreSQL 15 and citus.so are installed, building
# Citus from ../shared/citus when it is missing.
ensure_citus() {
	[ -x "$pg_config" ] || unavailable "PostgreSQL 15 is not installed ($pg_config missing)"
	bindir=$("$pg_config" --bindir)
	local libdir sharedir build
	libdir=$("$pg_config" --pkglibdir)
	sharedir=$("$pg_config" --sharedir)
	if [ -f "$libdir/citus.so" ] && [ -f "$sharedir/extension/citus.control" ]; then
		return
	fi
	build="$repo/../shared/citus/build.sh"
	[ -x "$build" ] || unavailable "citus.so is not in $libdir and there is no Citus source ($build)"
	[ "$(id -u)" -eq 0 ] || unavailable "citus.so is not in $libdir; run $build as root to install it"
	say "citus.so missing: building it with $build (2-6 minutes)"
	"$build" >&2 || die "building Citus with $build failed"
	[ -f "$libdir/citus.so" ] || die "$build ran but $libdir/citus.so is still missing"
}

state_file() { echo "$base/cluster.env"; }

load_state() {
	[ -f "$base/$marker" ] && [ -f "$(state_file)" ] || { say "no cluster in $base"; exit 2; }
	# shellcheck disable=SC1090
	. "$(state_file)"
	workers=$CITUS_WORKERS
	coordinator_port=$CITUS_COORDINATOR_PORT
}

save_state() {
	{
		echo "CITUS_WORKERS=$workers"
		echo "CITUS_COORDINATOR_PORT=$coordinator_port"
		for i in $(seq 1 "$workers"); do
			echo "CITUS_WORKER_${i}_PORT=$(worker_port "$i")"
		done
		echo "CITUS_OWNER_PID=${CITUS_OWNER_PID:-}"
	} >"$(state_file).tmp"
	mv "$(state_file).tmp" "$(state_file)"
}

worker_port() { local v="CITUS_WORKER_${1}_PORT"; echo "${!v}"; }
node_dir() { echo "$base/$1"; }
node_url() { echo "postgres://postgres@127.0.0.1:$1/$database?sslmode=disable"; }

# port_in_use: is anything listening on 127.0.0.1:$1?
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pick_port prints a free port for node index $1 (0 = coordinator).
pick_port() {
	if [ -n "${CITUS_PORT_BASE:-}" ]; then
		echo $((CITUS_PORT_BASE + $1))
		return
	fi
	local p
	for _ in $(seq 1 50); do
		# Below the kernel's ephemeral range (32768+) so outgoing connections don't take it.
		p=$((15000 + RANDOM % 17000))
		port_in_use "$p" || { echo "$p"; return; }
	done
	die "no free port found"
}

psql_node() { # port, sql...
	local port=$1 name
	shift
	name=$(name_of_port "$port")
	"$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$(node_dir "$name")" -p "$port" -U postgres -d "$database" -At "$@"
}

name_of_port() {
	if [ "$1" = "$coordinator_port" ]; then echo coordinator; return; fi
	for i in $(seq 1 "$workers"); do
		[ "$(worker_port "$i")" = "$1" ] && { echo "worker$i"; return; }
	done
	die "no node on port $1"
}

# init_node creates the data directory of node $1 listening on port $2.
init_node() {
	local name=$1 port=$2 dir
	dir=$(node_dir "$name")
	mkdir -p "$dir"
	[ "$(id -u)" -ne 0 ] || chown postgres: "$dir"
	as_pg "$bindir/initdb" -N -A trust -U postgres -E UTF8 --locale=C -D "$dir/data" >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; die "initdb of $name failed"; }
	cat >>"$dir/data/postgresql.conf" <<-EOF

		# citus-cluster.sh: $name of a local test cluster (2 cores, shared machine)
		listen_addresses = '127.0.0.1'
		port = $port
		unix_socket_directories = '$dir'
		shared_preload_libraries = 'citus'
		wal_level = logical
		max_connections = 150
		max_prepared_transactions = 300
		shared_buffers = 64MB
		work_mem = 4MB
		maintenance_work_mem = 64MB
		effective_cache_size = 512MB
		min_wal_size = 64MB
		max_wal_size = 512MB
		max_worker_processes = 16
		max_wal_senders = 16
		max_replication_slots = 16
		max_logical_replication_workers = 8
		fsync = off
		track_functions = pl
		log_min_messages = warning
		log_line_prefix = '%m [%p] $name %q%a '
		citus.node_conninfo = 'sslmode=disable'
		${CITUS_EXTRA_CONF:-}
	EOF
	# PostgreSQL 15.19+ (CVE-2026-6471) loads only listed logical decoding plugins;
	# Citus splits shards (isolate_tenant_to_new_shard) with its "citus" one.
	if "$bindir/postgres" --describe-config 2>/dev/null | grep '^output_plugin_libraries' >/dev/null; then
		echo "output_plugin_libraries = 'pgoutput, test_decoding, citus'" >>"$dir/data/postgresql.conf"
	fi
}

node_running() { as_pg "$bindir/pg_ctl" -D "$(node_dir "$1")/data" status >/dev/null 2>&1; }

start_node() {
	local name=$1 dir
	dir=$(node_dir "$name")
	node_running "$name" && return 0
	as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 120 start >/dev/null ||
		{ tail -n 20 "$dir/postgres.log" >&2; return 1; }
}

stop_node() {
	local dir
	dir=$(node_dir "$1")
	[ -f "$dir/data/postmaster.pid" ] || return 0
	as_pg "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
		as_pg "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
}

# create_node makes node $1 (index $2) from scratch: a port, initdb, start,
# the database and the extension. A port taken meanwhile by someone else is
# retried with another one. Prints the port.
create_node() {
	local name=$1 index=$2 port
	for attempt in 1 2 3 4 5; do
		port=$(pick_port "$index")
		rm -rf "$(node_dir "$name")"
		init_node "$name" "$port"
		if start_node "$name"; then
			break
		fi
		[ -z "${CITUS_PORT_BASE:-}" ] && [ "$attempt" -lt 5 ] || die "$name did not start on port $port"
		say "$name did not start on port $port; trying another port"
	done
	local sql="-h $(node_dir "$name") -p $port -U postgres"
	# shellcheck disable=SC2086
	"$bindir/psql" -X -q -v ON_ERROR_STOP=1 $sql -d postgres -c "CREATE DATABASE $database" >/dev/null
	# shellcheck disable=SC2086
	"$bindir/psql" -X -q -v ON_ERROR_STOP=1 $sql -d "$database" -c "CREATE EXTENSION citus" >/dev/null
	echo "$port"
}

print_env() {
	echo "CITUS_BASEDIR=$base"
	echo "CITUS_COORDINATOR_PORT=$coordinator_port"
	echo "CITUS_COORDINATOR_URL=$(node_url "$coordinator_port")"
	echo "CITUS_WORKERS=$workers"
	local urls=()
	for i in $(seq 1 "$workers"); do
		echo "CITUS_WORKER_${i}_PORT=$(worker_port "$i")"
		echo "CITUS_WORKER_${i}_URL=$(node_url "$(worker_port "$i")")"
		urls+=("$(node_url "$(worker_port "$i")")")
	done
	echo "CITUS_WORKER_URLS=$(IFS=,; echo "${urls[*]}")"
}

cmd_up() {
	ensure_citus
	if [ -f "$base/$marker" ] && [ -f "$(state_file)" ]; then
		load_state
		say "resuming the cluster in $base"
		start_node coordinator
		for i in $(seq 1 "$workers"); do start_node "worker$i"; done
		print_env
		return
	fi
	[ ! -e "$base" ] || [ -z "$(ls -A "$base")" ] || die "$base exists and holds no cluster; pick another BASEDIR"
	mkdir -p "$base"
	touch "$base/$marker"
	[ "$(id -u)" -ne 0 ] || chown postgres: "$base"
	local started=$SECONDS tmp pids=()
	workers=$want_workers
	tmp=$(mktemp -d)
	# Nodes are made in parallel: initdb, start and CREATE EXTENSION each take about a second.
	create_node coordinator 0 >"$tmp/coordinator" &
	pids+=($!)
	for i in $(seq 1 "$workers"); do
		create_node "worker$i" "$i" >"$tmp/worker$i" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || { rm -rf "$tmp"; die "a node failed to start; see $base/*/postgres.log"; }; done
	coordinator_port=$(cat "$tmp/coordinator")
	for i in $(seq 1 "$workers"); do
		printf -v "CITUS_WORKER_${i}_PORT" '%s' "$(cat "$tmp/worker$i")"
	done
	rm -rf "$tmp"
	save_state
	psql_node "$coordinator_port" -c "SELECT citus_set_coordinator_host('127.0.0.1', $coordinator_port)" >/dev/null
	for i in $(seq 1 "$workers"); do
		psql_node "$coordinator_port" -c "SELECT citus_add_node('127.0.0.1', $(worker_port "$i"))" >/dev/null
	done
	say "cluster up in $base: coordinator and $workers workers in $((SECONDS - started))s"
	print_env
}

cmd_add_worker() {
	load_state
	local i=$((workers + 1)) port
	port=$(create_node "worker$i" "$i")
	printf -v "CITUS_WORKER_${i}_PORT" '%s' "$port"
	workers=$i
	save_state
	psql_node "$coordinator_port" -c "SELECT citus_add_node('127.0.0.1', $port)" >/dev/null
	say "worker$i added on port $port"
	print_env
}

cmd_status() {
	load_state
	print_env
	local name
	for name in coordinator $(for i in $(seq 1 "$workers"); do echo "worker$i"; done); do
		local key
		key=$(echo "$name" | tr '[:lower:]' '[:upper:]' | sed 's/WORKER\([0-9]*\)/WORKER_\1/')
		if node_running "$name"; then echo "CITUS_${key}_STATE=running"; else echo "CITUS_${key}_STATE=stopped"; fi
	done
	if node_running coordinator; then
		echo "CITUS_ACTIVE_WORKERS=$(psql_node "$coordinator_port" -c "SELECT count(*) FROM citus_get_active_worker_nodes()")"
	fi
}

cmd_down() {
	[ -d "$base" ] || { say "nothing in $base"; return; }
	[ -f "$base/$marker" ] || die "$base was not made by this script; not removing it"
	local d
	for d in "$base"/*/; do
		if [ -d "$d/data" ]; then stop_node "$(basename "$d")"; fi
	done
	rm -rf "$base"
	say "cluster in $base stopped and removed"
}

# kill_worker SIGKILLs the postmaster and every one of its children at once,
# as a crashed machine would: stopped first so that it forks nothing new.
cmd_kill_worker() {
	load_state
	local dir pm kids
	dir=$(node_dir "worker$index")
	[ -f "$dir/data/postmaster.pid" ] || die "worker$index is not running"
	pm=$(head -n 1 "$dir/data/postmaster.pid")
	kill -STOP "$pm"
	kids=$(pgrep -P "$pm" || true)
	# shellcheck disable=SC2086
	kill -KILL "$pm" $kids
	# Dead once gone or a zombie (its new parent may be slow to reap it); then
	# its lock files go too, or the next start would take the zombie for a live server.
	for _ in $(seq 1 100); do
		# shellcheck disable=SC2086
		ps -o stat= -p "$pm" $(printf -- '-p %s ' $kids) 2>/dev/null | grep -qv '^Z' || break
		sleep 0.05
	done
	rm -f "$dir/data/postmaster.pid" "$dir"/.s.PGSQL.*.lock
	say "worker$index killed (postmaster $pm and $(echo "$kids" | wc -w) children)"
}

cmd_reap() {
	local d owner
	for d in "${TMPDIR:-/tmp}"/idemctl-citus*/ /tmp/idemctl-citus*/; do
		[ -f "$d/$marker" ] && [ -f "$d/cluster.env" ] || continue
		owner=$(sed -n 's/^CITUS_OWNER_PID=//p' "$d/cluster.env")
		[ -n "$owner" ] || continue
		kill -0 "$owner" 2>/dev/null && continue
		base=${d%/}
		say "reaping $base (owner $owner is gone)"
		cmd_down
	done
}

usage() {
	sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit "${1:-2}"
}

[ $# -ge 1 ] || usage
case $1 in -h | --help | help) usage 0 ;; esac
cmd=$1
shift
index=
case $cmd in
kill-worker | stop-worker | start-worker)
	[ $# -ge 1 ] && [[ $1 =~ ^[0-9]+$ ]] || usage
	index=$1
	shift
	;;
esac
want_workers=2
base=
while [ $# -gt 0 ]; do
	case $1 in
	--workers) want_workers=${2:?--workers needs a number}; shift 2 ;;
	--workers=*) want_workers=${1#*=}; shift ;;
	-h | --help) usage 0 ;;
	-*) usage ;;
	*) base=$1; shift ;;
	esac
done
[[ $want_workers =~ ^[1-9][0-9]*$ ]] || usage
base=${base:-${CITUS_BASEDIR:-/tmp/idemctl-citus}}
base=$(realpath -m "$base")
pg_config_bindir() { [ -x "$pg_config" ] && "$pg_config" --bindir || true; }
bindir=$(pg_config_bindir)

case $cmd in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
add-worker) cmd_add_worker ;;
kill-worker) cmd_kill_worker ;;
stop-worker) load_state && stop_node "worker$index" && say "worker$index stopped" ;;
start-worker) load_state && start_node "worker$index" && say "worker$index started" ;;
reap) cmd_reap ;;
*) usage ;;
esac
