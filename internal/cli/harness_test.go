package cli

import "github.com/idemctl/idemctl/internal/cli/clitest"

// The end-to-end harness lives in clitest; these names keep the tests short.
func init() { clitest.RunRoot = Run }

var (
	run           = clitest.Run
	runTTY        = clitest.RunTTY
	runQ          = clitest.RunQ
	newCLIFixture = clitest.NewFixture
	jsonLines     = clitest.JSONLines
	rsvLine       = clitest.RsvLine
	rsvFile       = clitest.RsvFile
	rsvJSON       = clitest.RsvJSON
	rsvCount      = clitest.RsvCount
	rsvCounts     = clitest.RsvCounts
	idemctlLines  = clitest.IdemctlLines
	doctorLines   = clitest.DoctorLines
	readOnly      = clitest.ReadOnly
	recTransfer   = clitest.RecTransfer
	recApply      = clitest.RecApply
	recFile       = clitest.RecFile
)

type cliFixture = clitest.Fixture
