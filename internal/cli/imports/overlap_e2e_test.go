package imports_test

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// The note after a plan says which of the ambiguous rows before its cursor
// a plan with --since reads again: as many as it says with the default
// overlap, all of them with the overlap it names. --since-overlap 0 reads
// from the cursor itself (not the default 24h), and a negative one is bad
// input.
func TestImportNoteSaysWhichAmbiguousRowsASinceRunReadsAgain(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2)
	dbtest.Admin(t, dsn, importStore)
	amb := filepath.Join(t.TempDir(), "amb.ndjson")
	plan := func(extra ...string) (int, string) {
		args := append([]string{"import", "plan", "--class", "demo.transfer", "--correction", ledger, "--from-postgres", dbtest.SourceDSN(dsn),
			"--password-env", dbtest.SourcePasswordEnv, "--query", importQuery, "--ambiguous", amb, "--overwrite",
			"--reason", "cutover", "--operator", "alice"}, extra...)
		code, _, errOut := runQ(t, dsn, args...)
		return code, errOut
	}
	code, errOut := plan()
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	m := regexp.MustCompile(`note: (\d+) ambiguous rows lie before the cursor: a plan with --since (\S+) reads again those stamped within --since-overlap of it ` +
		`\((\d+) of them with the default 24h0m0s; all (\d+) with --since-overlap (\S+) or more\)`).FindStringSubmatch(errOut)
	require.Len(t, m, 6, errOut)
	assert.Equal(t, "6", m[1], "the store's six ambiguous rows are all at or before the cursor")
	cursor, byDefault, forAll := m[2], m[3], m[5]

	code, errOut = plan("--since", cursor)
	assert.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, errOut, "("+byDefault+" ambiguous, 0 invalid)", "the default overlap reads again as many ambiguous rows as the note said")
	code, errOut = plan("--since", cursor, "--since-overlap", forAll)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, errOut, ", 6 ambiguous (in ", "the overlap the note named reads every one of them again")
	code, errOut = plan("--since", cursor, "--since-overlap", "0")
	assert.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, errOut, "nothing to import: 0 rows read (0 ambiguous, 0 invalid)", "0 reads from the cursor itself, not the default 24h")

	code, errOut = plan("--since", cursor, "--since-overlap", "-1h")
	assert.Equal(t, cmdutil.ExitUsage, code, errOut)
	assert.Contains(t, errOut, "--since-overlap -1h0m0s: want 0 (read from the cursor) or more")
}
