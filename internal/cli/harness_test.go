package cli

import (
	"testing"

	"github.com/idemctl/idemctl/internal/cli/clitest"
)

// The end-to-end harness lives in clitest; these names keep the tests short.
func init() { clitest.RunRoot = Run }

// TestMain gives the package's tests one temporary directory for the
// binaries they build, removed when they end: nothing is left in /tmp. It
// also sets the password variable of the postgres replay sources the tests
// add (their DSNs never carry one), once, so that the tests stay parallel.
func TestMain(m *testing.M) { clitest.Main(m, "idemctl-cli-test-") }

var (
	run           = clitest.Run
	runTTY        = clitest.RunTTY
	runQ          = clitest.RunQ
	newCLIFixture = clitest.NewFixture
	jsonLines     = clitest.JSONLines
	rsvLine       = clitest.RsvLine
	rsvFile       = clitest.RsvFile
	readOnly      = clitest.ReadOnly
)
