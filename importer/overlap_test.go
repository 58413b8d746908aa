package importer

import (
	"testing"
	"time"
)

// Once, `import plan --since C --since-overlap 0` read the 24 hours
// before the cursor again: ReadFrom takes 0 for "the default", and the flag
// passes the operator's 0 through. The help says "read again the rows
// stamped this long before the cursor"; 0 long is not 24h. (Only a negative
// value reads none, which no help text says.)
func TestSinceOverlapZeroMeansZero(t *testing.T) {
	since := &Cursor{At: time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC), Tenant: "t9", OperationID: "a-3"}
	got := ReadFrom(since, 0)
	if !got.At.Equal(since.At) {
		t.Errorf("--since-overlap 0 reads from %s, %s before the cursor; want the cursor itself", got.At, since.At.Sub(got.At))
	}
}
