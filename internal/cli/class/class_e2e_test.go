package class_test

import (
	"context"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli"
	"github.com/idemctl/idemctl/internal/cli/clitest"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// The end-to-end tests run the assembled command tree through clitest.
func init() { clitest.RunRoot = cli.Run }

// TestMain gives the package's tests one temporary directory for the
// binaries they build.
func TestMain(m *testing.M) { clitest.Main(m, "idemctl-class-test-") }

// Every message of class set fits 80 columns with a class name of 40
// characters, on a terminal and in a pipe, and says all it said: the class
// name and the target whole, the command to type next on a line of its own.
func TestClassSetMessagesFitEightyColumns(t *testing.T) {
	t.Parallel()
	dsn := dbtest.As(dbtest.NewDatabase(t), dbtest.Operator)
	name := "payments.settlement_adjustments_by_region"
	require.Len(t, name, 41)
	name = name[:40]
	dbtest.RegisterAppClass(t, dsn, name, "forever")

	for _, args := range [][]string{
		{"--retention", "horizon", "--min-age", "720h", "--reason", "a projection now (CHG-118)", "--yes"},
		{"--money", "/amount,/currency,minor"},
		{"--money", "none", "--reason", "moved to the ledger service (CHG-301)"},
		{"--payloads-repeat", "yes", "--reason", "daily totals repeat"},
		{"--payloads-repeat", "no", "--reason", "they do not"},
		{"--redrive", "http", "--url", "http://127.0.0.1:8089/transfers", "--downstream-idempotent"},
		{"--redrive", "none"},
	} {
		for _, tty := range []bool{false, true} {
			run := clitest.Run
			if tty {
				run = clitest.RunTTY
			}
			code, out, errOut := run(t, dsn, "", append([]string{"class", "set", name, "--operator", "alice", "-o", "table"}, args...)...)
			if args[0] == "--money" && args[1] == "none" && tty {
				continue // planned once already: the change is pending
			}
			require.Equal(t, cmdutil.ExitOK, code, "%v: %s", args, errOut)
			require.True(t, strings.HasPrefix(out, "class "+name+": "), "%v: %q", args, out)
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				assert.LessOrEqual(t, ansi.StringWidth(l), 80, "%v: %q", args, l)
			}
			one := strings.Join(strings.Fields(out), " ")
			switch args[0] {
			case "--retention":
				// Planned (a forever class made horizon): changes 1 and 2.
				assert.Contains(t, one, "making it horizon is planned as change")
				assert.Regexp(t, `\n  another person approves it: idemctl change approve [12]\n`, out, "the command whole, on its own line")
			case "--money":
				if args[1] == "none" {
					assert.Contains(t, out, "\n  another person approves it: idemctl change approve 3\n", "the command whole, on its own line")
				} else {
					assert.Contains(t, one, "moves money (amount /amount, currency /currency, minor units)")
				}
			case "--redrive":
				if args[1] == "http" {
					assert.Contains(t, one, "re-driven via http to http://127.0.0.1:8089/transfers (downstream idempotent: true)")
				}
			}
		}
	}
}

// A login mapped to no person cannot plan making a forever class horizon
// (exit 5, the class unchanged), nor mark a correction done.
func TestClassSetForeverToHorizonNeedsAPerson(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDatabase(t)
	dbtest.RegisterAppClass(t, dbtest.As(db, dbtest.Operator), "proj.money", "forever")
	unmapped := dbtest.As(db, dbtest.Unmapped)
	code, _, errOut := clitest.Run(t, unmapped, "", "class", "set", "proj.money", "--retention", "horizon",
		"--reason", "no contract any more", "--yes", "--operator", "nobody")
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, errOut, "maps to no person")
	code, out, _ := clitest.Run(t, unmapped, "", "class", "list", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `"class":"proj.money","retention":"forever"`)

	code, _, errOut = clitest.Run(t, dbtest.As(db, dbtest.Operator), "", "corrections", "add", "--tenant", "t1", "--op", "op-1",
		"--reason", "refund pending", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, errOut = clitest.Run(t, unmapped, "", "corrections", "done", "1", "--operator", "nobody")
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, errOut, "maps to no person")
}

// Lowering a class's min-age is planned, not applied: without --reason it
// exits 5 and changes nothing; with one it plans a change, the floor stays
// and the command names the change to approve; another person's approval
// lowers it. Raising it applies at once.
func TestClassSetLoweringMinAgeIsPlanned(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDatabase(t)
	alice, bob := dbtest.As(db, dbtest.Operator), dbtest.As(db, dbtest.Operator2)
	dbtest.RegisterAppClass(t, alice, "proj.view", "horizon")
	list := func() string {
		code, out, errOut := clitest.Run(t, alice, "", "class", "list", "-o", "json")
		require.Equal(t, cmdutil.ExitOK, code, errOut)
		return out
	}
	code, out, errOut := clitest.Run(t, alice, "", "class", "set", "proj.view", "--retention", "horizon", "--min-age", "30d", "--operator", "alice", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "class proj.view: retention horizon, min age 30d")
	// --min-age alone is refused by naming what it needs, and changes nothing.
	before := list()
	code, _, errOut = clitest.Run(t, alice, "", "class", "set", "proj.view", "--min-age", "40d", "--operator", "alice")
	assert.Equal(t, cmdutil.ExitUsage, code)
	assert.Contains(t, errOut, "--min-age goes with --retention")
	assert.Equal(t, before, list())

	code, out, errOut = clitest.Run(t, alice, "", "class", "set", "proj.view", "--retention", "horizon", "--min-age", "1d", "--operator", "alice")
	assert.Equal(t, cmdutil.ExitInvalid, code, out)
	assert.Contains(t, errOut, "needs a reason")
	assert.Contains(t, list(), `"min_age_seconds":2592000`)

	// Asked first, as making a forever class horizon: --yes without a
	// terminal, and a "no" on one plans nothing.
	lower := []string{"class", "set", "proj.view", "--retention", "horizon", "--min-age", "1d",
		"--reason", "rebuilt daily now (CHG-140)", "--operator", "alice", "-o", "table"}
	code, _, errOut = clitest.Run(t, alice, "", lower...)
	assert.Equal(t, cmdutil.ExitUsage, code)
	assert.Contains(t, errOut, "class proj.view has a min age of 30d: lowering it to 1d lets purges reach identities it protected")
	code, _, errOut = clitest.RunTTY(t, alice, "n\n", lower...)
	assert.Equal(t, cmdutil.ExitFailure, code)
	assert.Contains(t, errOut, "nothing younger than 30d is ever purged. Plan lowering it to 1d")
	code, out, errOut = clitest.Run(t, alice, "", "change", "list", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Empty(t, strings.TrimSpace(out), "nothing planned")
	code, out, errOut = clitest.Run(t, alice, "", append(lower, "--yes")...)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, strings.Join(strings.Fields(out), " "),
		"class proj.view: lowering its min age to 1d is planned as change 1; it stays 30d (retention horizon) until then")
	assert.Contains(t, out, "\n  another person approves it: idemctl change approve 1\n")
	assert.Contains(t, list(), `"min_age_seconds":2592000`)

	code, out, errOut = clitest.Run(t, alice, "", "change", "list", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "class_min_age")
	code, _, errOut = clitest.Run(t, alice, "", "change", "approve", "1", "--operator", "alice", "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, "the planner approves nothing")
	assert.Contains(t, errOut, "another person must approve")
	assert.Contains(t, list(), `"min_age_seconds":2592000`)
	code, _, errOut = clitest.Run(t, bob, "", "change", "approve", "1", "--operator", "bob", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, list(), `"min_age_seconds":86400`)
	// As typed, not in seconds; and as a readable interval in the table.
	code, out, errOut = clitest.Run(t, alice, "", "change", "show", "1", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "  before:   retention horizon, min age 30d\n  after:    retention horizon, min age 1d\n")
	code, out, errOut = clitest.Run(t, alice, "", "change", "list", "--all", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, strings.Join(strings.Fields(out), " "), "retention horizon, min age 30d -> retention horizon, min age 1d")
	conn, err := pgx.Connect(context.Background(), alice)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var minAge string
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT min_age::text FROM idem.op_class WHERE name = 'proj.view'").Scan(&minAge))
	assert.Equal(t, "1 day", minAge)
}
