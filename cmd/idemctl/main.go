// Command idemctl recovers and reconciles idempotent operations on PostgreSQL.
package main

import (
	"os"

	"github.com/idemctl/idemctl/internal/cli"
)

func main() {
	os.Exit(cli.Main())
}
