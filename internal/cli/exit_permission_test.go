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

// rv finding: a login without the operator's grants (a service's app login
// typed into IDEMCTL_DSN by mistake) gets "permission denied" from these
// read commands, and they exit 5, a code their documented list (docs/
// exit-codes.md, each --help) does not hold; the same refusal exits 1 from
// class list, record show, corrections list or horizon status. A script
// that branches on the documented codes takes 5 for "invalid input or a
// rule" on a command that has none.
func TestRVPermissionDeniedExitsADocumentedCode(t *testing.T) {
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
	} {
		code, _, errOut := runQ(t, app, append(strings.Fields(c.name), c.args...)...)
		assert.True(t, slices.Contains(documented(c.name), code), "%s as the app login: exit %d, documented %v: %s",
			c.name, code, documented(c.name), strings.TrimSpace(errOut))
	}
}
