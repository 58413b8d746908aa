package pgerr

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

var (
	errA = errors.New("sentinel a")
	errB = errors.New("sentinel b")
)

func TestMapKeepsTheSentinelAndTheDatabaseError(t *testing.T) {
	pg := &pgconn.PgError{Code: "IX901", Message: "record 7 was decided", Detail: "by alice", Hint: "see show 7"}
	wrapped := fmt.Errorf("decide: %w", pg)
	for _, tc := range []struct {
		named bool
		want  string
	}{
		{false, "record 7 was decided (by alice); see show 7"},
		{true, "sentinel a: record 7 was decided (by alice); see show 7"},
	} {
		got := Table{Named: tc.named, Codes: map[string]error{"IX901": errA}}.Map(wrapped)
		if got.Error() != tc.want {
			t.Errorf("named=%v: %q, want %q", tc.named, got.Error(), tc.want)
		}
		if !errors.Is(got, errA) {
			t.Errorf("named=%v: errors.Is(sentinel) is false", tc.named)
		}
		var back *pgconn.PgError
		if !errors.As(got, &back) || back != pg {
			t.Errorf("named=%v: errors.As does not find the PostgreSQL error", tc.named)
		}
	}
}

func TestMapLeavesOtherErrorsAlone(t *testing.T) {
	table := Table{Codes: map[string]error{"IX901": errA}}
	other := &pgconn.PgError{Code: "23505", Message: "duplicate key"}
	if got := table.Map(other); got != error(other) {
		t.Errorf("an unmapped SQLSTATE came back as %v", got)
	}
	plain := errors.New("connection reset")
	if got := table.Map(plain); got != plain {
		t.Errorf("a non-database error came back as %v", got)
	}
	if table.Find(plain) != nil || table.Find(nil) != nil {
		t.Error("Find returned an error for a non-database error")
	}
}

func TestMergePrefersTheFirstTable(t *testing.T) {
	first := Table{Named: true, Codes: map[string]error{"IX1": errA}}
	merged := first.Merge(Table{Codes: map[string]error{"IX1": errB, "IX2": errB}})
	if !merged.Named || merged.Codes["IX1"] != errA || merged.Codes["IX2"] != errB {
		t.Errorf("merged table %+v", merged)
	}
	if len(first.Codes) != 1 {
		t.Error("Merge changed the first table")
	}
}

// A named table does not say the sentinel twice when the database's message
// starts with it ("unknown operation class: unknown operation class 'x'").
func TestNamedTableSaysTheSentinelOnce(t *testing.T) {
	unknown := errors.New("unknown operation class")
	pg := &pgconn.PgError{Code: "IX003", Message: "unknown operation class 'rides.charge'"}
	got := Table{Named: true, Codes: map[string]error{"IX003": unknown}}.Map(pg)
	if want := "unknown operation class 'rides.charge'"; got.Error() != want || !errors.Is(got, unknown) {
		t.Errorf("%q (is sentinel: %v), want %q", got.Error(), errors.Is(got, unknown), want)
	}
}
