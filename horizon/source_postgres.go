package horizon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/internal/db"
)

// probePostgres runs the source's query, read-only, on its own database (an
// outbox or DLQ table). The result's shape says how it proves closure:
//   - one column, at most one row: the oldest replayable timestamp (NULL or no
//     row: nothing to replay) -- bounding;
//   - three columns (tenant_id, operation_id, ts): every identity it could
//     replay -- enumerating; a fourth column, the payload, is allowed (the
//     proof ignores it; intake reads it).
//
// Anything else is nonsense and fails the proof.
func probePostgres(ctx context.Context, s Source, env *probeEnv) (observation, error) {
	if env := s.Config.PasswordEnv; env != "" && !passwordEnvRE.MatchString(env) {
		return observation{}, fmt.Errorf("the source's password variable %s is refused: only variables named %s... are read for a source", env, PasswordEnvPrefix)
	}
	conn, err := db.ConnectStoredSource(ctx, s.Config.DSN, s.Config.PasswordEnv, "DSN of replay source "+s.Name)
	if err != nil {
		return observation{}, err
	}
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return observation{}, fmt.Errorf("begin read-only: %s", db.Scrub(s.Config.DSN, err.Error()))
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	query := s.Config.Query
	if env.lenient {
		// Reading messages (intake): in a stable order, so that "row N" is
		// the same row on every run.
		query = "SELECT * FROM (" + strings.TrimRight(strings.TrimSpace(query), "; \n") + ") AS source ORDER BY 1, 2, 3"
	}
	rows, err := tx.Query(ctx, query)
	if err != nil {
		return observation{}, fmt.Errorf("query: %s", db.Scrub(s.Config.DSN, err.Error()))
	}
	defer rows.Close()
	fields := rows.FieldDescriptions()
	if len(fields) == 0 {
		// pgx reports a query that failed (permission denied, no such table)
		// through rows.Err, with no columns: say why, not "0 columns".
		rows.Close()
		if err := rows.Err(); err != nil {
			return observation{}, fmt.Errorf("query: %s", db.Scrub(s.Config.DSN, err.Error()))
		}
	}
	switch len(fields) {
	case 1:
		var oldest *time.Time
		n := 0
		for rows.Next() {
			n++
			if n > 1 {
				return observation{}, fmt.Errorf("nonsense: a bounding query returns one row (the oldest timestamp), got more")
			}
			if err := rows.Scan(&oldest); err != nil {
				return observation{}, fmt.Errorf("nonsense: a bounding query returns a timestamp: %v", err)
			}
		}
		if err := rows.Err(); err != nil {
			return observation{}, fmt.Errorf("query: %s", db.Scrub(s.Config.DSN, err.Error()))
		}
		return observation{mode: Bounding, oldest: oldest, detail: map[string]any{"rows": n}}, nil
	case 3, 4:
		return enumeratePostgres(ctx, s, rows, env)
	}
	return observation{}, fmt.Errorf("nonsense: the query returns %d columns; want 1 (oldest timestamp), "+
		"3 (tenant_id, operation_id, ts) or 4 (tenant_id, operation_id, ts, payload)", len(fields))
}

// enumeratePostgres reads the rows of an enumerating query: (tenant_id,
// operation_id, ts), and optionally the payload as a fourth column (text,
// json or jsonb; NULL when the row has none).
func enumeratePostgres(ctx context.Context, s Source, rows pgx.Rows, env *probeEnv) (observation, error) {
	withPayload := len(rows.FieldDescriptions()) == 4
	var oldest *time.Time
	var n int64
	for rows.Next() {
		var m Message
		var payload, tenant, op *string
		dest := []any{&tenant, &op, &m.TS}
		if withPayload {
			dest = append(dest, &payload)
		}
		if err := rows.Scan(dest...); err != nil {
			return observation{}, fmt.Errorf("nonsense: an enumerating query returns (tenant_id text, operation_id text, ts timestamptz[, payload text|jsonb]): %v", err)
		}
		n++
		m.At = fmt.Sprintf("row %d", n)
		switch {
		case tenant != nil && op != nil:
			m.Tenant, m.OperationID = *tenant, *op
		case env.lenient:
			m.Problem = "tenant_id or operation_id is NULL"
		default:
			return observation{}, fmt.Errorf("nonsense: an enumerating query returns (tenant_id text, operation_id text, ts timestamptz[, payload text|jsonb]): row %d has a NULL identity", n)
		}
		if payload != nil {
			m.Payload = []byte(*payload)
		}
		if err := env.pin(ctx, m); err != nil {
			return observation{}, err
		}
		if m.TS != nil && (oldest == nil || m.TS.Before(*oldest)) {
			t := *m.TS
			oldest = &t
		}
	}
	if err := rows.Err(); err != nil {
		return observation{}, fmt.Errorf("query: %s", db.Scrub(s.Config.DSN, err.Error()))
	}
	return observation{mode: Enumerating, oldest: oldest, enumerated: n}, nil
}
