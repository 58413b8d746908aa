// Package pgerr turns the database's refusals into a package's own errors.
// Every function in schema idem refuses with a SQLSTATE of its own (IX...,
// listed in docs/exit-codes.md); each domain package gives its table of
// SQLSTATE to sentinel error, and callers test the result with errors.Is
// for the sentinel and errors.As for the *pgconn.PgError, which keeps the
// database's message, detail and hint.
package pgerr

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Table maps SQLSTATEs to a package's sentinel errors. Named says whether
// the error's text starts with the sentinel's own (`unknown operation class:
// ...`) or is the database's message alone (which names what is wrong).
type Table struct {
	Codes map[string]error
	Named bool
}

// Error is a refusal by the database, mapped to a sentinel.
type Error struct {
	Sentinel error
	Err      *pgconn.PgError
	named    bool
}

// Error is the database's message, its detail in parentheses and its hint
// after a semicolon, after the sentinel's text when the table says so.
func (e *Error) Error() string {
	msg := e.Err.Message
	if e.Err.Detail != "" {
		msg += " (" + e.Err.Detail + ")"
	}
	if e.Err.Hint != "" {
		msg += "; " + e.Err.Hint
	}
	// (not when the database's message says it already: "unknown
	// operation class 'x'" stays one sentence)
	if e.named && !strings.HasPrefix(msg, e.Sentinel.Error()) {
		return e.Sentinel.Error() + ": " + msg
	}
	return msg
}

// Unwrap exposes both the sentinel and the PostgreSQL error.
func (e *Error) Unwrap() []error { return []error{e.Sentinel, e.Err} }

// Find returns the mapped error when err is (or wraps) a PostgreSQL error
// whose SQLSTATE the table names, or nil.
func (t Table) Find(err error) *Error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil
	}
	sentinel, ok := t.Codes[pgErr.Code]
	if !ok {
		return nil
	}
	return &Error{Sentinel: sentinel, Err: pgErr, named: t.Named}
}

// Map returns the mapped error, or err itself when the table does not name
// its SQLSTATE (or it is not a PostgreSQL error).
func (t Table) Map(err error) error {
	if e := t.Find(err); e != nil {
		return e
	}
	return err
}

// Merge returns a table holding t's codes and then more's, for a package
// whose functions refuse with codes of two families (t wins on a clash).
func (t Table) Merge(more Table) Table {
	codes := make(map[string]error, len(t.Codes)+len(more.Codes))
	for k, v := range more.Codes {
		codes[k] = v
	}
	for k, v := range t.Codes {
		codes[k] = v
	}
	return Table{Codes: codes, Named: t.Named}
}
