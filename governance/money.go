package governance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is what a query needs: a pool, a connection or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Units of a money declaration's amount.
const (
	// Minor: amounts are whole minor units (cents).
	Minor = "minor"
	// Major: amounts are in the currency's major unit (euros).
	Major = "major"
)

// Money declares that a class moves money and where its amount is: JSON
// Pointers into the payload for the amount and the currency, and the unit.
type Money struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
	Unit     string `json:"unit"`
}

// String renders the declaration as --money takes it.
func (m Money) String() string { return m.Amount + "," + m.Currency + "," + m.Unit }

// ParseMoney reads --money: "AMOUNT_POINTER,CURRENCY_POINTER,minor|major",
// or "none" (nil: the class moves no money).
func ParseMoney(s string) (*Money, error) {
	if strings.TrimSpace(s) == "none" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return nil, fmt.Errorf("--money %q: want AMOUNT_POINTER,CURRENCY_POINTER,minor|major (or none)", s)
	}
	m := &Money{Amount: strings.TrimSpace(parts[0]), Currency: strings.TrimSpace(parts[1]), Unit: strings.TrimSpace(parts[2])}
	if !strings.HasPrefix(m.Amount, "/") || !strings.HasPrefix(m.Currency, "/") {
		return nil, fmt.Errorf("--money %q: the amount and the currency are JSON Pointers (/amount)", s)
	}
	if m.Unit != Minor && m.Unit != Major {
		return nil, fmt.Errorf("--money %q: the unit is minor or major, not %q", s, m.Unit)
	}
	return m, nil
}

// MoneyResult is what SetMoney did: applied at once (a first declaration, or
// no change), or planned as a governed change another person approves.
type MoneyResult struct {
	Applied  bool  `json:"applied"`
	ChangeID int64 `json:"change_id,omitempty"`
}

// SetMoney declares class's money (nil: it moves none) through
// idem.class_money_set: a first declaration applies at once; changing or
// removing one plans a governed change (reason required).
func SetMoney(ctx context.Context, db DBTX, class string, m *Money, operator, reason string) (MoneyResult, error) {
	var arg any
	if m != nil {
		arg = m
	}
	var res MoneyResult
	var change *int64
	err := db.QueryRow(ctx, "SELECT applied, change_id FROM idem.class_money_set($1, $2, $3, nullif($4, ''))",
		class, arg, operator, reason).Scan(&res.Applied, &change)
	if err != nil {
		return MoneyResult{}, fmt.Errorf("class %s: money: %w", class, mapError(err))
	}
	if change != nil {
		res.ChangeID = *change
	}
	return res, nil
}

// ClassMoney returns class's money declaration, nil when it moves none.
func ClassMoney(ctx context.Context, db DBTX, class string) (*Money, error) {
	var m *Money
	err := db.QueryRow(ctx, "SELECT money FROM idem.op_class WHERE name = $1", class).Scan(&m)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownClass, class)
	}
	return m, err
}
