// Command labworker is lab.Worker alone: the worker process the lab's own
// tests start once per crash trial. idemctl lab runs the same function as
// its hidden `idemctl lab worker` (internal/cli/lab's tests run that one);
// this binary is a tenth of idemctl's size and starts on a fraction of its
// CPU (16 ms against 68 ms a start here, most of it the kernel mapping the
// larger binary), which a test run pays some 800 times.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/idemctl/idemctl/lab"
)

func main() {
	if err := lab.Worker(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lab worker:", err)
		os.Exit(1)
	}
}
