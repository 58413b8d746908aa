package reconcile_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	reconcilecmd "github.com/idemctl/idemctl/internal/cli/reconcile"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/reconcile"
)

func TestReconcileCommandOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	saved := filepath.Join(dir, "psp.json")
	require.NoError(t, reconcile.SaveMapping(saved, reconcile.Mapping{Class: "demo.transfer", Report: "s.csv",
		Key: "tenant=merchant,operation_id=reference", Compare: "/amount=amount_minor", Since: "2026-11-01"}, false))
	ios, _, _, _ := cmdutil.Test(false)
	f := cmdutil.NewFactory(ios)
	var got *reconcilecmd.ReconcileOptions
	cmd := reconcilecmd.NewCmdReconcile(f, func(o *reconcilecmd.ReconcileOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--mapping", saved, "--until", "2026-11-02", "--compare", "/amount=amt,/currency=ccy",
		"--emit-resolve", "out.ndjson", "--pin", "--max-pins", "5", "--sort-buffer", "8"})
	require.NoError(t, cmd.Execute())
	assert.Equal(t, reconcile.Mapping{Name: "psp", Class: "demo.transfer", Report: filepath.Join(dir, "s.csv"),
		Key: "tenant=merchant,operation_id=reference", Compare: "/amount=amt,/currency=ccy", Since: "2026-11-01", Until: "2026-11-02"}, got.Mapping)
	assert.Equal(t, "out.ndjson", got.EmitResolve)
	assert.True(t, got.Pin)
	assert.Equal(t, 5, got.MaxPins)
	assert.Equal(t, 8, got.SortBufferMiB)

	for _, args := range [][]string{
		{"--report", "r.csv", "--key", "tenant=a,operation_id=b"},
		{"--class", "c", "--report", "r.csv", "--key", "operation_id=b"},
		{"--class", "c", "--report", "r.csv", "--key", "tenant=a,operation_id=b", "--since", "soon"},
		{"--mapping", filepath.Join(dir, "missing.json")},
		{"--class", "c", "--report", "r.csv", "--key", "tenant=a,operation_id=b", "--batch-size", "0"},
	} {
		code, out, errOut := run(t, "", "", append([]string{"reconcile"}, args...)...)
		assert.Equal(t, cmdutil.ExitUsage, code, "%v: %s", args, errOut)
		assert.Empty(t, out)
	}

	for _, cmd := range []string{"reconcile", "intake"} {
		code, out, _ := run(t, "", "", cmd, "--help")
		require.Equal(t, cmdutil.ExitOK, code)
		assert.Contains(t, out, "Examples:", cmd)
		assert.Contains(t, out, "Exit codes:", cmd)
	}

	// --save-mapping writes the flags and runs nothing.
	out := filepath.Join(dir, "new.json")
	code, stdout, errOut := run(t, "", "", "reconcile", "--class", "demo.transfer", "--report", "/srv/s.csv",
		"--key", "tenant=merchant,operation_id=reference", "--since", "yesterday", "--save-mapping", out)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, stdout, "saved mapping")
	m, err := reconcile.LoadMapping(out)
	require.NoError(t, err)
	assert.Equal(t, "yesterday", m.Since)
}

func TestReconcileCommand(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	recApply(t, dsn, map[string]int{"c-1": 100, "c-2": 200, "c-3": 300})
	dir := t.TempDir()
	header := "merchant,reference,amount_minor,currency"
	clean := recFile(t, dir, "clean.csv", header, "acme,c-1,100,EUR", "acme,c-2,200.00,EUR", "acme,c-3,300,EUR")
	base := []string{"reconcile", "--class", "demo.transfer", "--key", "tenant=merchant,operation_id=reference",
		"--compare", "/amount=amount_minor,/currency=currency"}

	code, out, errOut := run(t, dsn, "", append(base, "--report", clean, "-o", "table")...)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "3 matched")
	assert.Contains(t, out, "│ matched")
	assert.Contains(t, out, "600")

	// One of each discrepancy: JSON lines, the summary last, exit 3.
	report := recFile(t, dir, "settlement.csv", header, "acme,c-1,100,EUR", "acme,c-2,250,EUR", "acme,x-1,5,EUR")
	batch := filepath.Join(dir, "unsettled.ndjson")
	code, out, errOut = run(t, dsn, "", append(base, "--report", report, "--emit-resolve", batch, "--pin", "-o", "json")...)
	require.Equal(t, cmdutil.ExitConflict, code, errOut)
	rows := rsvJSON(t, out)
	require.Len(t, rows, 5)
	statuses := map[string]string{}
	for _, r := range rows[:4] {
		statuses[r["operation_id"].(string)] = r["status"].(string)
	}
	assert.Equal(t, map[string]string{"c-1": "matched", "c-2": "mismatch", "c-3": "missing_in_report", "x-1": "missing_in_inbox"}, statuses)
	summary := rows[4]["summary"].(map[string]any)
	assert.EqualValues(t, 3, summary["pinned"])
	assert.Contains(t, errOut, "reconcile: settlement.csv (3 lines")
	body, err := os.ReadFile(batch)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"operation_id":"c-3"`)
	assert.EqualValues(t, 3, rsvCount(t, pool, "SELECT count(*) FROM idem.horizon_correction WHERE done_at IS NULL"))

	// The batch resolves as already applied: those operations did happen.
	code, out, errOut = run(t, dsn, "", "resolve", "--file", batch, "--dry-run", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Equal(t, "already_applied", rsvJSON(t, out)[0]["outcome"])

	// The batch file exists: refused before anything, with exit 2.
	audits := rsvCount(t, pool, "SELECT count(*) FROM idem.audit")
	code, out, errOut = run(t, dsn, "", append(base, "--report", report, "--emit-resolve", batch)...)
	assert.Equal(t, cmdutil.ExitUsage, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "--overwrite")
	assert.Equal(t, audits, rsvCount(t, pool, "SELECT count(*) FROM idem.audit"))

	// A table on a terminal lists the discrepancies and what was written.
	code, out, _ = run(t, dsn, "", append(base, "--report", report, "--emit-resolve", batch, "--overwrite", "--pin", "-o", "table")...)
	assert.Equal(t, cmdutil.ExitConflict, code)
	for _, want := range []string{"missing_in_inbox", "/amount: inbox 200, report 250", "Resolve batch: " + batch,
		"(3 were pinned already)", "Recorded as audit row"} {
		assert.Contains(t, out, want)
	}
}

// Bad reports: one clear line, exit 5, nothing on stdout, nothing written.
func TestReconcileBadReports(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	recApply(t, dsn, map[string]int{"c-1": 100})
	dir := t.TempDir()
	var gz bytes.Buffer
	gz.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 0x01})
	truncated := filepath.Join(dir, "truncated.csv.gz")
	require.NoError(t, os.WriteFile(truncated, gz.Bytes(), 0o600))
	empty := filepath.Join(dir, "empty.csv")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	base := []string{"reconcile", "--class", "demo.transfer", "--key", "tenant=merchant,operation_id=reference",
		"--compare", "/amount=amount_minor", "--pin"}
	for _, tc := range []struct {
		name, report, want string
		code               int
	}{
		{"missing column", recFile(t, dir, "a.csv", "merchant,reference,amount", "acme,c-1,100"), `no column "amount_minor"`, cmdutil.ExitInvalid},
		{"truncated gzip", truncated, "truncated", cmdutil.ExitInvalid},
		{"empty", empty, "empty.csv is empty", cmdutil.ExitInvalid},
	} {
		batch := filepath.Join(dir, tc.name+".ndjson")
		code, out, errOut := run(t, dsn, "", append(base, "--report", tc.report, "--emit-resolve", batch)...)
		assert.Equal(t, tc.code, code, tc.name)
		assert.Empty(t, out, tc.name)
		assert.Contains(t, errOut, tc.want, tc.name)
		assert.Contains(t, errOut, "nothing was written", tc.name)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
		assert.NoFileExists(t, batch)
	}
	// A line with a non-numeric amount: reported, exit 5, nothing emitted or pinned.
	batch := filepath.Join(dir, "amount.ndjson")
	code, out, _ := run(t, dsn, "", append(base, "--report", recFile(t, dir, "b.csv", "merchant,reference,amount_minor", "acme,c-1,1O0"),
		"--emit-resolve", batch, "-o", "json")...)
	assert.Equal(t, cmdutil.ExitInvalid, code)
	assert.Contains(t, out, `"status":"invalid","line":2`)
	assert.Contains(t, out, `not a number: \"1O0\"`)
	assert.NoFileExists(t, batch)
	assert.Zero(t, rsvCount(t, pool, "SELECT count(*) FROM idem.horizon_correction"))
}

// intake from a DLQ table and from an archive: the batch holds the absent
// and conflicting operations, and resolve --dry-run of it agrees.
func TestIntakeThenResolveDryRun(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	recApply(t, dsn, map[string]int{"d-1": 100, "d-2": 200, "d-3": 300})
	dbtest.Admin(t, dsn, "CREATE TABLE public.dlq (tenant_id text, operation_id text, failed_at timestamptz DEFAULT now(), body text); "+
		"GRANT SELECT ON public.dlq TO "+pgx.Identifier{string(dbtest.Nobody)}.Sanitize())
	dbtest.Admin(t, dsn, "INSERT INTO public.dlq (tenant_id, operation_id, body) VALUES "+
		"('acme', 'd-1', $1), ('acme', 'd-2', $2), ('acme', 'n-1', $3), ('acme', 'n-2', NULL)",
		recTransfer(100), recTransfer(201), recTransfer(7))
	require.NoError(t, horizon.AddSource(context.Background(), pool, horizon.Source{Name: "dlq", Kind: horizon.KindPostgres,
		Config: horizon.SourceConfig{DSN: dbtest.SourceDSN(dsn), PasswordEnv: dbtest.SourcePasswordEnv,
			Query: "SELECT tenant_id, operation_id, failed_at, body FROM public.dlq"}}, "alice"))
	dir := t.TempDir()
	archive := filepath.Join(dir, "archive")
	require.NoError(t, os.MkdirAll(archive, 0o755))
	recFile(t, archive, "2026-11-01.ndjson",
		fmt.Sprintf(`{"tenant":"acme","operation_id":"d-3","payload":%s}`, recTransfer(300)),
		fmt.Sprintf(`{"tenant":"acme","operation_id":"d-3b","payload":%s}`, recTransfer(30)))
	require.NoError(t, horizon.AddSource(context.Background(), pool, horizon.Source{Name: "archive", Kind: horizon.KindArchive,
		Config: horizon.SourceConfig{Dir: archive}}, "alice"))

	out := filepath.Join(dir, "ambiguous.ndjson")
	code, stdout, errOut := run(t, dsn, "", "intake", "--source", "dlq", "--class", "demo.transfer", "--out", out, "-o", "table")
	assert.Equal(t, cmdutil.ExitInvalid, code, "a message without a payload: %s", errOut)
	assert.Contains(t, stdout, "4 messages: 1 present, 1 absent, 1 conflicting, 1 no_payload; 3 line(s) to resolve written to "+out)
	code, stdout, errOut = run(t, dsn, "", "resolve", "--file", out, "--dry-run", "-o", "json")
	assert.Equal(t, cmdutil.ExitConflict, code, errOut)
	outcomes := map[string]string{}
	for _, r := range rsvJSON(t, stdout) {
		outcomes[r["operation_id"].(string)] = r["outcome"].(string)
	}
	assert.Equal(t, map[string]string{"d-2": "would_conflict", "n-1": "would_apply", "n-2": "invalid"}, outcomes)

	// From the archive, to stdout, straight into resolve.
	code, stdout, errOut = run(t, dsn, "", "intake", "--source", "archive", "--class", "demo.transfer")
	assert.Equal(t, cmdutil.ExitConflict, code, errOut)
	assert.Contains(t, errOut, "1 present, 1 absent")
	code, stdout, errOut = run(t, dsn, stdout, "resolve", "--file", "-", "--dry-run", "-o", "json")
	assert.Equal(t, cmdutil.ExitOK, code, errOut)
	rows := rsvJSON(t, stdout)
	require.Len(t, rows, 1)
	assert.Equal(t, "d-3b", rows[0]["operation_id"])
	assert.Equal(t, "would_apply", rows[0]["outcome"])

	code, _, errOut = run(t, dsn, "", "intake", "--source", "nope", "--class", "demo.transfer")
	assert.Equal(t, cmdutil.ExitNotFound, code)
	assert.Contains(t, errOut, "replay source not found")
}
