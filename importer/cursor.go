package importer

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Cursor is a position in a store: the last (created_at, tenant, operation)
// an import read, in that order. A later import with --since reads only the
// rows after it.
type Cursor struct {
	At          time.Time
	Tenant      string
	OperationID string
}

// DefaultSinceOverlap is how far before a --since cursor a plan reads the
// store again when --since-overlap is not given: a row whose transaction
// committed later than that after its created_at was stamped would be
// missed.
const DefaultSinceOverlap = 24 * time.Hour

// ReadFrom is where a plan given --since reads from: overlap before it, so
// that a row stamped before the cursor that committed after the earlier
// import read the store is read now. An overlap of 0 (or less) reads from
// the cursor itself: the default is the caller's to apply (the flag's
// default is DefaultSinceOverlap), never a stand-in for 0. nil for nil.
func ReadFrom(since *Cursor, overlap time.Duration) *Cursor {
	if since == nil {
		return nil
	}
	if overlap <= 0 {
		c := *since
		return &c
	}
	return &Cursor{At: since.At.Add(-overlap)}
}

// Rereads reports whether a plan given --since since with this overlap
// reads the row at again: it comes after ReadFrom(since, overlap).
func Rereads(since Cursor, overlap time.Duration, at Cursor) bool {
	return ReadFrom(&since, overlap).Before(at)
}

// String is the cursor as printed and taken by --since:
// RFC 3339 created_at (UTC, nanoseconds), then the tenant and the operation
// id, each path-escaped, separated by "/".
func (c Cursor) String() string {
	return c.At.UTC().Format(time.RFC3339Nano) + "/" + url.PathEscape(c.Tenant) + "/" + url.PathEscape(c.OperationID)
}

// ParseCursor reads a cursor printed by an earlier import.
func ParseCursor(s string) (Cursor, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return Cursor{}, fmt.Errorf("cursor %q: want CREATED_AT/TENANT/OPERATION as printed by the last import", s)
	}
	at, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil {
		return Cursor{}, fmt.Errorf("cursor %q: created_at: %v", s, err)
	}
	tenant, err1 := url.PathUnescape(parts[1])
	op, err2 := url.PathUnescape(parts[2])
	if err1 != nil || err2 != nil {
		return Cursor{}, fmt.Errorf("cursor %q: tenant or operation is not path-escaped", s)
	}
	return Cursor{At: at, Tenant: tenant, OperationID: op}, nil
}

// Before reports whether c comes before d in the store's order.
func (c Cursor) Before(d Cursor) bool {
	if !c.At.Equal(d.At) {
		return c.At.Before(d.At)
	}
	if c.Tenant != d.Tenant {
		return c.Tenant < d.Tenant
	}
	return c.OperationID < d.OperationID
}
