package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/dbtest"
)

// A login without the reader's grants (a service's app login typed into
// IDEMCTL_DSN by mistake) gets "permission denied" from the reading
// commands, and they exit a code their documented list (docs/exit-codes.md,
// each --help) holds: 1, as class list or corrections list do, never 5
// ("invalid input or a rule"), which a script would take for a refusal.
func TestPermissionDeniedExitsADocumentedCode(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	q := fx.Conflict(t, "acme", "p-1", 100, 200)
	app := dbtest.As(fx.DSN, dbtest.App)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "exit-codes.md"))
	require.NoError(t, err)
	documented := func(name string) []int {
		for _, l := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(l, "| `idemctl "+name+"` |") {
				var codes []int
				for _, f := range strings.Fields(strings.Split(l, "|")[2]) {
					n, err := strconv.Atoi(f)
					require.NoError(t, err)
					codes = append(codes, n)
				}
				return codes
			}
		}
		t.Fatalf("no row for %s", name)
		return nil
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"quarantine list", nil},
		{"quarantine groups", nil},
		{"quarantine show", []string{fmt.Sprint(q)}},
		{"change list", nil},
		{"change show", []string{"1"}},
		{"class list", nil},
		{"corrections list", nil},
	} {
		code, _, errOut := runQ(t, app, append(strings.Fields(c.name), c.args...)...)
		assert.True(t, slices.Contains(documented(c.name), code), "%s as the app login: exit %d, documented %v: %s",
			c.name, code, documented(c.name), strings.TrimSpace(errOut))
		assert.Contains(t, errOut, "permission denied", c.name)
	}
}
