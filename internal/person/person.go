// Package person maps database logins to the persons behind them
// (idem.person, idem.person_login). Four-eyes rules compare persons, not the
// self-declared --operator label and not logins: one person may hold several
// logins, or a pattern of dynamic ones (Vault, IAM). Only the schema owner may
// change the mapping; every change is in the audit log.
package person

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/migrations"
)

// Errors.
var (
	// ErrInvalid: an empty or malformed person name or login, a login
	// mapped already, or one that is not mapped.
	ErrInvalid = errors.New("invalid person mapping")
	// ErrNotOwner: the login may not change the mapping (only the schema
	// owner, or a superuser acting as it, may).
	ErrNotOwner = errors.New("only the schema owner maps logins to persons")
)

// Login is one mapping of a login (or a glob pattern, * for any run of
// characters) to a person.
type Login struct {
	Pattern   string    `json:"login"`
	Person    string    `json:"person"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
}

// Add maps login (or a pattern) to person, creating the person. conn must be
// a login that may act as the schema owner role (a superuser, or a member).
func Add(ctx context.Context, conn *pgx.Conn, person, login string) (Login, error) {
	if err := idem.CheckText("a person name", person, 128); err != nil {
		return Login{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := idem.CheckText("a login", login, 128); err != nil || strings.Trim(login, "*") == "" {
		return Login{}, fmt.Errorf("%w: a login (or a pattern with * naming more than *) is required", ErrInvalid)
	}
	var l Login
	err := asOwner(ctx, conn, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT login_pattern, person, created_at, created_by FROM idem.person_add($1, $2)", person, login).
			Scan(&l.Pattern, &l.Person, &l.CreatedAt, &l.CreatedBy)
	})
	return l, err
}

// Remove forgets one login mapping; the person stays for the records naming it.
func Remove(ctx context.Context, conn *pgx.Conn, login string) (Login, error) {
	var l Login
	err := asOwner(ctx, conn, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT login_pattern, person, created_at, created_by FROM idem.person_remove($1)", login).
			Scan(&l.Pattern, &l.Person, &l.CreatedAt, &l.CreatedBy)
	})
	return l, err
}

// List returns every mapping, by person then login.
func List(ctx context.Context, q idem.DBTX) ([]Login, error) {
	rows, err := q.Query(ctx, "SELECT login_pattern, person, created_at, created_by FROM idem.person_login ORDER BY person, login_pattern")
	if err != nil {
		return nil, fmt.Errorf("list persons: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Login, error) {
		var l Login
		err := r.Scan(&l.Pattern, &l.Person, &l.CreatedAt, &l.CreatedBy)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("list persons: %w", err)
	}
	return out, nil
}

// Current is the person behind q's login ("" when it maps to none).
func Current(ctx context.Context, q idem.DBTX) (string, error) {
	var p *string
	if err := q.QueryRow(ctx, "SELECT idem.current_person()").Scan(&p); err != nil {
		return "", fmt.Errorf("read the person behind this login: %w", err)
	}
	if p != nil {
		return *p, nil
	}
	return "", nil
}

// asOwner runs fn as the schema owner role and maps the refusals.
func asOwner(ctx context.Context, conn *pgx.Conn, fn func(pgx.Tx) error) error {
	err := migrations.AsOwner(ctx, conn, fn)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, migrations.ErrNotOwner):
		return fmt.Errorf("%w: %v", ErrNotOwner, err)
	case errors.As(err, &pgErr) && pgErr.Code == "IX401":
		return fmt.Errorf("%w: %s", ErrInvalid, pgErr.Message)
	case errors.As(err, &pgErr) && pgErr.Code == "42501":
		return fmt.Errorf("%w: %s", ErrNotOwner, pgErr.Message)
	}
	return err
}
