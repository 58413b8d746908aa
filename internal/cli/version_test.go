package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/migrations"
)

// idemctl version says what it is and which schema it expects, without
// connecting.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, "postgres://nobody@127.0.0.1:1/none", "", "version", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	v := jsonLines(t, out)
	require.Len(t, v, 1)
	assert.EqualValues(t, migrations.SchemaVersion(), v[0]["schema_version"])
	assert.EqualValues(t, migrations.CodeVersion, v[0]["code_version"])
	assert.Regexp(t, `^go1\.`, v[0]["go"])
	assert.NotEmpty(t, v[0]["commit"])

	code, out, _ = run(t, "", "", "version", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Regexp(t, `(?m)^schema \d{3}, code package \d+$`, out)
}
