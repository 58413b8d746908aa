package horizon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// A plan's pins add up, on screen and in JSON, by what holds them: an
// archive lists op-3 and op-2, a pending manual correction op-2 (the archive
// holds it: one holder an identity), and open quarantine records op-4..op-7.
// The proof's table of sources alone showed "pins 1" beside "pinned 5".
func TestHorizonPlanPinsAddUpByHolder(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2)
	ctx := context.Background()
	dbtest.RegisterAppClass(t, dsn, "proj.view", "horizon")
	dbtest.Seed(t, dsn, "proj.view", "t1", "op-", 10, 10*24*time.Hour, time.Hour)
	app := dbtest.PoolAs(t, dsn, dbtest.App, 2)
	for i := 4; i <= 7; i++ {
		prep, err := idem.Prepare(idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: fmt.Sprintf("op-%d", i)},
			Class: "proj.view", Payload: []byte(`{"n":999}`)}, idem.PayloadLimits{})
		require.NoError(t, err)
		res, claimed, err := idem.Claim(ctx, app, prep)
		require.NoError(t, err)
		require.False(t, claimed)
		require.Equal(t, idem.Conflict, res.Outcome)
	}
	code, _, errOut := runQ(t, dsn, "corrections", "add", "--tenant", "t1", "--op", "op-2", "--reason", "refund pending", "--operator", "carol")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.ndjson"), []byte(
		`{"tenant":"t1","operation_id":"op-3","ts":"2026-01-01T00:00:00Z"}`+"\n"+
			`{"tenant":"t1","operation_id":"op-2","ts":"2026-01-01T00:00:00Z"}`+"\n"), 0o644))
	code, _, errOut = runQ(t, dsn, "horizon", "source", "add", "archive", "--kind", "archive", "--dir", dir, "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	code, out, errOut := runQ(t, dsn, "horizon", "plan", "--class", "proj.view", "--before", "5d", "-o", "json", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var p horizon.Plan
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	assert.EqualValues(t, 6, p.Pinned)
	assert.Equal(t, []horizon.PinHolder{{HeldBy: "quarantine", Identities: 4}, {HeldBy: "archive", Identities: 2}}, p.PinnedBy)
	var sum int64
	for _, h := range p.PinnedBy {
		sum += h.Identities
	}
	assert.Equal(t, p.Pinned, sum, "the holders add up to the pins")

	code, out, errOut = runQ(t, dsn, "horizon", "status", fmt.Sprint(p.ID), "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	out = strings.ReplaceAll(out, "│", " ") // the table's borders
	assert.Regexp(t, `pinned\s+6 identities \(held by quarantine: 4, archive: 2\)`, out)
	assert.Regexp(t, `(?m)^\s*archive\s+archive\s+enumerating\s+.*\s2\s+\d+ms\s+closed`, out)
	assert.Regexp(t, `(?m)^\s*manual\s+manual\s+enumerating\s+.*\s0 \(1 listed\)\s+\d+ms\s+closed`, out)
	assert.Regexp(t, regexp.MustCompile(`(?m)^\s*quarantine\s+-\s+-\s+-\s+4\s+-\s+-\s+held by open or rejected quarantine records`), out)
}
