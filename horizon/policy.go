package horizon

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/governance"
)

// Retention says what a purge of a class needs.
type Retention string

// Retentions (idem.op_class.retention).
const (
	// Forever: money. A purge needs a business contract reference, recorded
	// with the plan; tombstones are never dropped. The default.
	Forever Retention = "forever"
	// Horizon: a rebuildable projection; purged once the horizon is proven.
	Horizon Retention = "horizon"
)

// Errors of class policy.
var (
	// ErrUnknownClass: no registered class of that name.
	ErrUnknownClass = errors.New("unknown operation class")
	// ErrInvalidPolicy: a retention or min-age that cannot be stored.
	ErrInvalidPolicy = errors.New("invalid class policy")
)

// ClassPolicy is a class's purge policy.
type ClassPolicy struct {
	Name      string    `json:"class"`
	Retention Retention `json:"retention"`
	// MinAge is the floor below which nothing is ever purged (0: none).
	MinAge      time.Duration `json:"-"`
	SQLEffect   bool          `json:"sql_effect"`
	Description string        `json:"description,omitempty"`
	// Money is where a money class's amount is; nil: it moves no money.
	Money *governance.Money `json:"money"`
}

// MarshalJSON renders min_age in seconds.
func (p ClassPolicy) MarshalJSON() ([]byte, error) {
	type plain ClassPolicy
	return jsonMarshal(struct {
		plain
		MinAgeSeconds float64 `json:"min_age_seconds"`
	}{plain(p), p.MinAge.Seconds()})
}

const classColumns = `name, retention, coalesce(extract(epoch FROM min_age), 0)::float8, effect IS NOT NULL, coalesce(description, ''), money`

func scanClass(row pgx.Row) (ClassPolicy, error) {
	var p ClassPolicy
	var ret string
	var secs float64
	if err := row.Scan(&p.Name, &ret, &secs, &p.SQLEffect, &p.Description, &p.Money); err != nil {
		return ClassPolicy{}, err
	}
	p.Retention = Retention(ret)
	p.MinAge = time.Duration(secs * float64(time.Second))
	return p, nil
}

// ListClasses returns every registered class with its policy.
func ListClasses(ctx context.Context, q DBTX) ([]ClassPolicy, error) {
	rows, err := q.Query(ctx, "SELECT "+classColumns+" FROM idem.op_class ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("list classes: %w", err)
	}
	defer rows.Close()
	var out []ClassPolicy
	for rows.Next() {
		p, err := scanClass(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// GetClass returns one class's policy.
func GetClass(ctx context.Context, q DBTX, name string) (ClassPolicy, error) {
	p, err := scanClass(q.QueryRow(ctx, "SELECT "+classColumns+" FROM idem.op_class WHERE name = $1", name))
	if errors.Is(err, pgx.ErrNoRows) {
		return ClassPolicy{}, fmt.Errorf("%w %q (idemctl class list shows them)", ErrUnknownClass, name)
	}
	if err != nil {
		return ClassPolicy{}, fmt.Errorf("read class %s: %w", name, err)
	}
	return p, nil
}

// SetClass changes a class's retention and, when minAge is not nil, its
// min-age floor (idem.class_set, which records the change in the audit log),
// and returns the class as it now is. Making a forever class horizon, and
// lowering or removing the min-age, need a reason and a person, and are not
// applied: each is planned as a governed change that another person approves
// (idemctl change approve); changeID is then that change's id (0 when
// applied).
func SetClass(ctx context.Context, pool *pgxpool.Pool, name string, retention Retention, minAge *time.Duration, operator, reason string) (pol ClassPolicy, changeID int64, err error) {
	if retention != Forever && retention != Horizon {
		return ClassPolicy{}, 0, fmt.Errorf("%w: retention %q: use forever or horizon", ErrInvalidPolicy, retention)
	}
	if minAge != nil && *minAge < 0 {
		return ClassPolicy{}, 0, fmt.Errorf("%w: --min-age must not be negative", ErrInvalidPolicy)
	}
	if err := checkOperator(operator); err != nil {
		return ClassPolicy{}, 0, err
	}
	var secs any
	if minAge != nil {
		secs = minAge.Seconds()
	}
	var r any
	if reason != "" {
		r = reason
	}
	var change *int64
	err = pool.QueryRow(ctx, "SELECT change_id FROM idem.class_set($1, $2, make_interval(secs => $3::float8), $4, $5, $6)",
		name, string(retention), secs, minAge != nil, operator, r).Scan(&change)
	if err != nil {
		return ClassPolicy{}, 0, fmt.Errorf("set class %s: %w", name, mapPlanError(err))
	}
	if change != nil {
		changeID = *change
	}
	pol, err = GetClass(ctx, pool, name)
	return pol, changeID, err
}

// FormatAge renders a class's min age as an operator types it (what
// ParseDuration reads): whole days as 30d, else as Go prints a duration
// (36h0m0s); "-" for none.
func FormatAge(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// ParseDuration reads a duration as an operator types it: Go's form (90m,
// 12h, 1h30m) or whole days (30d, also 30d12h).
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var days int64
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseInt(s[:i], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("duration %q: want e.g. 30d, 12h or 90m", s)
		}
		days, s = n, s[i+1:]
	}
	var rest time.Duration
	if s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("duration %q: want e.g. 30d, 12h or 90m", s)
		}
		rest = d
	}
	d := time.Duration(days)*24*time.Hour + rest
	if d < 0 {
		return 0, fmt.Errorf("duration %q must not be negative", s)
	}
	return d, nil
}

// ResolveBefore turns --before into a time on the primary's clock: an RFC 3339
// time as given, or a duration (30d) back from the primary's now.
func ResolveBefore(ctx context.Context, q DBTX, s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := ParseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--before %q: want an RFC 3339 time (2026-10-01T00:00:00Z) or a duration ago (30d, 12h)", s)
	}
	now, err := primaryNow(ctx, q)
	if err != nil {
		return time.Time{}, err
	}
	return now.Add(-d), nil
}
