package dbtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

var (
	tpsRE = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	txRE  = regexp.MustCompile(`number of transactions actually processed: (\d+)`)
)

// Pgbench runs script (pgbench's script language) against dsn with clients
// connections for seconds, in simple query mode (one statement a
// transaction, as a service calls the executor), and returns the
// transactions per second and how many ran. It skips b when pgbench is not
// installed.
func Pgbench(b *testing.B, dsn, script string, clients, seconds int) (tps float64, transactions int64) {
	b.Helper()
	return runPgbench(b, dsn, script, clients, "-T", strconv.Itoa(seconds))
}

// PgbenchCount is Pgbench for a number of transactions per connection
// instead of a duration.
func PgbenchCount(b *testing.B, dsn, script string, clients, transactions int) (tps float64, total int64) {
	b.Helper()
	return runPgbench(b, dsn, script, clients, "-t", strconv.Itoa(transactions))
}

func runPgbench(b *testing.B, dsn, script string, clients int, limit ...string) (tps float64, transactions int64) {
	b.Helper()
	if _, err := exec.LookPath("pgbench"); err != nil {
		b.Skip("pgbench is not installed (it ships with PostgreSQL: apt-get install postgresql-client)")
	}
	path := filepath.Join(b.TempDir(), "script.sql")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		b.Fatal(err)
	}
	threads := min(clients, 2)
	args := append([]string{"-n", "-M", "simple", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads)}, limit...)
	out, err := exec.Command("pgbench", append(args, "-f", path, dsn)...).CombinedOutput()
	if err != nil {
		b.Fatalf("pgbench: %v\n%s", err, out)
	}
	m, n := tpsRE.FindSubmatch(out), txRE.FindSubmatch(out)
	if m == nil || n == nil {
		b.Fatalf("pgbench printed no tps:\n%s", out)
	}
	tps, _ = strconv.ParseFloat(string(m[1]), 64)
	transactions, _ = strconv.ParseInt(string(n[1]), 10, 64)
	return tps, transactions
}
