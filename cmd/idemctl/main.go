// Command idemctl recovers and reconciles idempotent operations on PostgreSQL.
package main

import (
	"os"

	// Before bubbletea's init: no terminal query at start (see its doc).
	_ "0init.idemctl/termquiet"

	"github.com/idemctl/idemctl/internal/cli"
)

func main() {
	os.Exit(cli.Main())
}
