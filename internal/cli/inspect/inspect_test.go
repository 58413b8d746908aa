package inspect

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

func TestInspectCommandOptions(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := cmdutil.Test(false)
	f := cmdutil.NewFactory(ios)
	var insp *InspectOptions
	icmd := NewCmdInspect(f, func(o *InspectOptions) error { insp = o; return nil })
	icmd.SetArgs([]string{"--tenant", "acme", "--op", "charge-42"})
	require.NoError(t, icmd.Execute())
	assert.Equal(t, "acme", insp.Identity.TenantID)
	assert.Equal(t, "charge-42", insp.Identity.OperationID)
}
