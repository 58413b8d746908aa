package reconcile_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/reconcile"
	"github.com/idemctl/idemctl/recovery"
)

// TestMain sets the password variable of the postgres sources the tests
// add (dbtest.SourcePasswordEnv), once, so that the tests stay parallel.
func TestMain(m *testing.M) {
	dbtest.SetSourcePassword()
	os.Exit(m.Run())
}

// fixture is a fresh database with the demo ledger, seen as its users see
// it: pool is the operator alice (reconciles, pins), app a service's login
// (applies transfers through idem.execute).
type fixture struct {
	t    *testing.T
	ctx  context.Context
	pool *pgxpool.Pool
	app  *pgxpool.Pool
	dsn  string
	dir  string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	pool, dsn := dbtest.NewPool(t, 6)
	return &fixture{t: t, ctx: context.Background(), pool: pool, dsn: dsn, dir: t.TempDir(),
		app: dbtest.PoolAs(t, dsn, dbtest.App, 2)}
}

// transfer is one demo.transfer a service applies.
type transfer struct {
	tenant, op string
	amount     int64
	currency   string
}

func (tr transfer) payload() string {
	return fmt.Sprintf(`{"from":"acct-%s-a","to":"acct-%s-b","amount":%d,"currency":%q}`,
		tr.currency, tr.currency, tr.amount, tr.currency)
}

// apply runs transfers as the service does (the app login, idem.execute
// with the demo ledger's effect), pipelined 500 to a round trip.
func (f *fixture) apply(trs ...transfer) {
	f.t.Helper()
	for start := 0; start < len(trs); start += 500 {
		end := min(start+500, len(trs))
		var b pgx.Batch
		var preps []idem.Prepared
		for _, tr := range trs[start:end] {
			p, err := idem.Prepare(idem.Command{Identity: idem.Identity{TenantID: tr.tenant, OperationID: tr.op},
				Class: "demo.transfer", Payload: []byte(tr.payload())}, idem.PayloadLimits{})
			require.NoError(f.t, err)
			idem.QueueExecute(&b, p)
			preps = append(preps, p)
		}
		br := f.app.SendBatch(f.ctx, &b)
		for _, p := range preps {
			res, err := idem.ScanQueued(p, br.QueryRow())
			require.NoError(f.t, err)
			require.Equal(f.t, idem.Applied, res.Outcome)
		}
		require.NoError(f.t, br.Close())
	}
}

// now is the database's clock.
func (f *fixture) now() time.Time {
	f.t.Helper()
	var now time.Time
	require.NoError(f.t, f.pool.QueryRow(f.ctx, "SELECT clock_timestamp()").Scan(&now))
	return now
}

// file writes a file (a report, an archive's) in the test's directory,
// gzipped when the name ends in .gz.
func (f *fixture) file(name string, lines ...string) string {
	f.t.Helper()
	path := filepath.Join(f.dir, name)
	require.NoError(f.t, os.MkdirAll(filepath.Dir(path), 0o755))
	text := strings.Join(lines, "\n")
	if len(lines) > 0 {
		text += "\n"
	}
	if strings.HasSuffix(name, ".gz") {
		out, err := os.Create(path)
		require.NoError(f.t, err)
		zw := gzip.NewWriter(out)
		_, err = zw.Write([]byte(text))
		require.NoError(f.t, err)
		require.NoError(f.t, zw.Close())
		require.NoError(f.t, out.Close())
		return path
	}
	require.NoError(f.t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

// run reconciles and returns the summary and every finding.
func (f *fixture) run(cfg reconcile.Config) (reconcile.Summary, []reconcile.Finding, error) {
	f.t.Helper()
	if cfg.Operator == "" {
		cfg.Operator = "alice"
	}
	var found []reconcile.Finding
	sum, err := reconcile.Run(f.ctx, f.pool, cfg, func(x reconcile.Finding) error {
		found = append(found, x)
		return nil
	})
	return sum, found, err
}

// count reads a number as the operator.
func (f *fixture) count(sql string, args ...any) int64 {
	f.t.Helper()
	var n int64
	require.NoError(f.t, f.pool.QueryRow(f.ctx, sql, args...).Scan(&n), sql)
	return n
}

// settlementMapping is the mapping of the tests' CSV settlement reports.
func settlementMapping(report string) reconcile.Mapping {
	return reconcile.Mapping{Class: "demo.transfer", Report: report,
		Key: "tenant=merchant,operation_id=reference", Compare: "/amount=amount_minor,/currency=currency"}
}

// csvLine is a settlement report line for a transfer.
func csvLine(tr transfer) string {
	return fmt.Sprintf("%s,%s,%d,%s,settled", tr.tenant, tr.op, tr.amount, tr.currency)
}

const csvHeader = "merchant,reference,amount_minor,currency,status"

// readBatch reads a resolve batch as resolve does: every line a request,
// each one resolve would run (or answer invalid for a payload left null).
func readBatch(t *testing.T, b []byte) []recovery.Request {
	t.Helper()
	src := recovery.NDJSON(bytes.NewReader(b), 1<<20)
	var out []recovery.Request
	for {
		it, err := src.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		out = append(out, it.Request)
	}
}
