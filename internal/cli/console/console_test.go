package console

import (
	"testing"
	"time"

	"github.com/idemctl/idemctl/internal/cli/clitest"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

func TestTUICommandOptions(t *testing.T) {
	// Not parallel: it sets NO_COLOR.
	t.Setenv("NO_COLOR", "")
	ios, _, _, _ := cmdutil.Test(true)
	f := cmdutil.NewFactory(ios)
	var got *TUIOptions
	cmd := func() *cobra.Command {
		return NewCmdTUI(f, func(o *TUIOptions) error { got = o; return nil })
	}

	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, cmd()))
	assert.Equal(t, 5*time.Second, got.Refresh)
	assert.False(t, got.NoColor)
	assert.False(t, got.JSON, "a terminal: not JSON")

	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, cmd(), "--refresh", "0", "--no-color"))
	assert.Equal(t, time.Duration(0), got.Refresh)
	assert.True(t, got.NoColor)

	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, cmd(), "--refresh", "30s"))
	assert.Equal(t, 30*time.Second, got.Refresh)

	t.Setenv("NO_COLOR", "1")
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, cmd()))
	assert.True(t, got.NoColor, "NO_COLOR is honoured")
}
