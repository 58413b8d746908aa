package clitest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// RunRoot runs the assembled command tree (internal/cli.Run). The package
// under test sets it (an init in its external tests), so that clitest never
// imports the root and the root's own tests may use it.
var RunRoot func(ctx context.Context, f *cmdutil.Factory, args []string) int

// Run executes a command line against dsn with non-terminal streams.
func Run(t *testing.T, dsn, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runOn(t, false, dsn, stdin, args...)
}

// RunTTY executes a command line against dsn with streams that act as a
// terminal (80 columns); stdin holds the answers to its questions.
func RunTTY(t *testing.T, dsn, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runOn(t, true, dsn, stdin, args...)
}

// RunQ executes a command line against dsn with non-terminal streams and no
// input.
func RunQ(t *testing.T, dsn string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return Run(t, dsn, "", args...)
}

func runOn(t *testing.T, tty bool, dsn, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	require.NotNil(t, RunRoot, "clitest.RunRoot is not set: set it to cli.Run in the package's tests")
	ios, in, out, errOut := cmdutil.Test(tty)
	in.WriteString(stdin)
	f := cmdutil.NewFactory(ios)
	defer f.Close()
	if dsn != "" {
		args = append(args, "--dsn", dsn)
	}
	code = RunRoot(context.Background(), f, args)
	return code, out.String(), errOut.String()
}

// Fixture is a fresh database: an operator's pool and DSN (what the
// commands run as), and a service's pool (the app role) that sends the
// operations whose retries conflict.
type Fixture struct {
	Ctx  context.Context
	Pool *pgxpool.Pool
	App  *pgxpool.Pool
	DSN  string
}

// NewFixture creates a Fixture on a fresh database.
func NewFixture(t *testing.T) Fixture {
	t.Helper()
	pool, dsn := dbtest.NewPool(t, 2)
	return Fixture{Ctx: context.Background(), Pool: pool, App: dbtest.PoolAs(t, dsn, dbtest.App, 2), DSN: dsn}
}

// Conflict sends a demo.transfer of amount stored, then a retry of it with
// amount incoming, and returns the quarantine id of the conflict.
func (fx Fixture) Conflict(t *testing.T, tenant, op string, stored, incoming int) int64 {
	t.Helper()
	c := func(amount int) idem.Command {
		return idem.Command{Identity: idem.Identity{TenantID: tenant, OperationID: op}, Class: "demo.transfer",
			Payload: []byte(fmt.Sprintf(`{"from":"alice","to":"bob","amount":%d,"currency":"EUR"}`, amount))}
	}
	_, err := idem.Execute(fx.Ctx, fx.App, c(stored))
	require.NoError(t, err)
	res, err := idem.Execute(fx.Ctx, fx.App, c(incoming))
	require.NoError(t, err)
	require.Equal(t, idem.Conflict, res.Outcome)
	return res.QuarantineID
}

// Count runs a count query as the operator.
func (fx Fixture) Count(t *testing.T, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, fx.Pool.QueryRow(fx.Ctx, sql).Scan(&n))
	return n
}

// State is the state of a bulk-accept plan.
func (fx Fixture) State(t *testing.T, plan string) string {
	t.Helper()
	var s string
	require.NoError(t, fx.Pool.QueryRow(fx.Ctx, "SELECT state FROM idem.quarantine_bulk_accept WHERE id = $1::bigint", plan).Scan(&s))
	return s
}

// JSONLines parses out as JSON lines, skipping blank ones.
func JSONLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		rows = append(rows, m)
	}
	return rows
}

// RsvLine is one resolve input line: a demo.transfer of amount.
func RsvLine(tenant, op string, amount int) string {
	return fmt.Sprintf(`{"tenant":%q,"operation_id":%q,"class":"demo.transfer","payload":{"from":"alice","to":"bob","amount":%d,"currency":"EUR"}}`, tenant, op, amount)
}

// RsvFile writes lines into a resolve input file and returns its path.
func RsvFile(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ops.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	return path
}

// RsvJSON parses resolve's JSON lines.
func RsvJSON(t *testing.T, out string) []map[string]any {
	t.Helper()
	return JSONLines(t, out)
}

// RsvCount runs a count query on pool.
func RsvCount(t *testing.T, pool *pgxpool.Pool, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}

// RsvCounts are the tables resolve may write: inbox, quarantine, postings.
func RsvCounts(t *testing.T, pool *pgxpool.Pool) [3]int {
	return [3]int{
		RsvCount(t, pool, "SELECT count(*) FROM idem.inbox"),
		RsvCount(t, pool, "SELECT count(*) FROM idem.quarantine"),
		RsvCount(t, pool, "SELECT count(*) FROM demo.posting"),
	}
}

// IdemctlLines are the stderr lines idemctl wrote as errors or warnings.
func IdemctlLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "idemctl: ") {
			out = append(out, l)
		}
	}
	return out
}

// DoctorLines runs idemctl doctor -o json and maps each check to its line.
func DoctorLines(t *testing.T, dsn string) (int, []string, map[string]map[string]any) {
	t.Helper()
	code, out, errOut := Run(t, dsn, "", "doctor", "-o", "json", "--skip-sources")
	var order []string
	checks := map[string]map[string]any{}
	for _, l := range JSONLines(t, out) {
		name := l["check"].(string)
		order = append(order, name)
		checks[name] = l
	}
	require.NotEmpty(t, order, errOut)
	return code, order, checks
}

// ReadOnly is dsn with every transaction read-only, as on a standby.
func ReadOnly(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	// %20, not the + of url.Values.Encode: pgx reads options literally.
	if u.RawQuery != "" {
		u.RawQuery += "&"
	}
	u.RawQuery += "options=-c%20default_transaction_read_only%3Don"
	return u.String()
}

// RecTransfer is the payload of a demo transfer of amount EUR.
func RecTransfer(amount int) string {
	return fmt.Sprintf(`{"from":"alice","to":"bob","amount":%d,"currency":"EUR"}`, amount)
}

// RecApply applies transfers acme/OP with the amounts given, as the service
// does (the app login, idem.execute).
func RecApply(t *testing.T, dsn string, amounts map[string]int) {
	t.Helper()
	app := dbtest.PoolAs(t, dsn, dbtest.App, 1)
	for op, amount := range amounts {
		res, err := idem.Execute(context.Background(), app, idem.Command{Identity: idem.Identity{TenantID: "acme", OperationID: op},
			Class: "demo.transfer", Payload: []byte(RecTransfer(amount))})
		require.NoError(t, err)
		require.Equal(t, idem.Applied, res.Outcome)
	}
}

// RecFile writes lines into dir/name and returns its path.
func RecFile(t *testing.T, dir, name string, lines ...string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	return path
}
