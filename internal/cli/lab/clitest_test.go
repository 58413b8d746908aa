package lab_test

import (
	"github.com/idemctl/idemctl/internal/cli"
	"github.com/idemctl/idemctl/internal/cli/clitest"
)

// The end-to-end tests run the assembled command tree through clitest.
func init() { clitest.RunRoot = cli.Run }

var (
	idemctlBinary = clitest.Binary
	run           = clitest.Run
)
