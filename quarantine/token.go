package quarantine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemctl/idemctl/idem"
)

// ErrToken: a preview token is unknown, used, expired, for another action
// or another person's (IX126); nothing was decided.
var ErrToken = errors.New("preview token refused")

// PreviewReject is the action a bulk reject's preview token is for.
const PreviewReject = "reject"

// StorePreview stores the exact set of open records preview counted on the
// server (idem.bulk_preview_create) and returns its token: a bulk decision
// takes it (TakePreview) once, by the same person, within the hour.
func StorePreview(ctx context.Context, db idem.DBTX, action string, p Preview) (string, error) {
	sel, err := json.Marshal(map[string]any{"filter": p.Filter})
	if err != nil {
		return "", err
	}
	var token string
	if err := db.QueryRow(ctx, "SELECT idem.bulk_preview_create($1, $2, $3)", action, p.IDs, string(sel)).Scan(&token); err != nil {
		return "", fmt.Errorf("store the preview: %w", mapTokenError(err))
	}
	return token, nil
}

// Taken is what a token stored: the exact record ids, and the filter they
// were chosen by (nil for ids given).
type Taken struct {
	IDs    []int64
	Filter *Filter
}

// TakePreview uses token for action and returns its set; a refused token is
// ErrToken.
func TakePreview(ctx context.Context, db idem.DBTX, token, action string) (Taken, error) {
	var t Taken
	var sel struct {
		Filter *Filter `json:"filter"`
	}
	if err := db.QueryRow(ctx, "SELECT ids, selection FROM idem.bulk_preview_take($1, $2)", token, action).Scan(&t.IDs, &sel); err != nil {
		return Taken{}, mapTokenError(err)
	}
	t.Filter = sel.Filter
	return t, nil
}

// Joined returns the open records that match the token's filter now but
// were not in its set: they joined after the preview and are not decided.
func Joined(ctx context.Context, db idem.DBTX, t Taken) ([]int64, error) {
	if t.Filter == nil {
		return nil, nil
	}
	now, err := PreviewBulk(ctx, db, Selection{Filter: *t.Filter})
	if errors.Is(err, ErrNothingToDecide) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var joined []int64
	for _, id := range now.IDs {
		if _, found := slices.BinarySearch(t.IDs, id); !found {
			joined = append(joined, id)
		}
	}
	return joined, nil
}

func mapTokenError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "IX126" {
		return fmt.Errorf("%w: %s", ErrToken, pgErr.Message)
	}
	if errors.As(err, &pgErr) && pgErr.Code == "IX313" {
		return fmt.Errorf("%w: %s", ErrNoPerson, pgErr.Message)
	}
	return err
}
