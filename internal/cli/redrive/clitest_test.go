package redrive_test

import (
	"testing"

	"github.com/idemctl/idemctl/internal/cli"
	"github.com/idemctl/idemctl/internal/cli/clitest"
)

// The end-to-end tests run the assembled command tree through clitest.
func init() { clitest.RunRoot = cli.Run }

// TestMain gives the package's tests one temporary directory for the
// binaries they build, and the password of the postgres replay sources.
func TestMain(m *testing.M) { clitest.Main(m, "idemctl-redrive-test-") }

var (
	idemctlBinary = clitest.Binary
	recApply      = clitest.RecApply
	runQ          = clitest.RunQ
	runTTY        = clitest.RunTTY
)
