package cli

import (
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/clitest"
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

// On a terminal that answers no colour query (a pseudo-terminal nobody
// reads queries from: script, expect, ssh -tt), a command neither writes the
// background query (ESC]11;?) nor waits for its answer: bubbletea's init
// asked it of every command and waited 5 s (internal/termquiet).
func TestNoTerminalQueryAtStart(t *testing.T) {
	t.Parallel()
	bin := clitest.Binary(t)
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "TERM=xterm-256color", "NO_COLOR=", "COLORFGBG=")
	start := time.Now()
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	require.NoError(t, err)
	defer ptmx.Close()
	// Nobody answers: read what it writes until it exits.
	out, _ := io.ReadAll(ptmx)
	require.NoError(t, cmd.Wait())
	took := time.Since(start)
	assert.NotContains(t, string(out), "\x1b]11;?", "no background colour query")
	assert.NotContains(t, string(out), "\x1b[6n", "no cursor position query")
	assert.Contains(t, string(out), "schema ")
	// The query's wait is 5 s; a loaded machine starts the binary in well under 4.
	assert.Less(t, took, 4*time.Second, "no wait for an answer")
}
