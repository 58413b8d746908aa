package change_test

import (
	"testing"

	"github.com/idemctl/idemctl/internal/cli"
	"github.com/idemctl/idemctl/internal/cli/clitest"
)

// The end-to-end tests run the assembled command tree through clitest.
func init() { clitest.RunRoot = cli.Run }

// TestMain gives the package's tests one temporary directory for the
// binaries they build.
func TestMain(m *testing.M) { clitest.Main(m, "idemctl-change-test-") }
