package resolve

import (
	"os"
	"runtime/debug"
)

// dryRunHeapLimit is the Go heap a dry run over a file lets grow before the
// collector runs (see collectForDryRun).
const dryRunHeapLimit = 120 << 20

// collectForDryRun sets the collector for a dry run over a file: it runs
// when the Go heap reaches dryRunHeapLimit, instead of each time the heap
// doubles. The input scan's entries live off the heap, so a million lines
// leave a live heap of about 40 MB (the window and batches), which GOGC 100
// collects every 40 MB allocated, about twice as often as when the scan's
// maps were on the heap; this holds the peak resident memory of a million
// distinct identities under 200 MiB with about main's CPU. GOGC or
// GOMEMLIMIT set in the environment are left alone. restore puts back the
// settings before.
func collectForDryRun() (restore func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	percent := debug.SetGCPercent(400)
	limit := debug.SetMemoryLimit(dryRunHeapLimit)
	return func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
}
