package hash

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

func TestHashCommandOptions(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := cmdutil.Test(false)
	f := cmdutil.NewFactory(ios)
	var got *HashOptions
	cmd := NewCmdHash(f, func(o *HashOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--canonical", "--max-bytes", "10", "--max-depth", "3", "p.json"})
	cmd.SetOut(&bytes.Buffer{})
	require.NoError(t, cmd.Execute())
	assert.Equal(t, "p.json", got.Source)
	assert.True(t, got.Canonical)
	assert.Equal(t, 10, got.Limits.MaxBytes)
	assert.Equal(t, 3, got.Limits.MaxDepth)
}
