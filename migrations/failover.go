package migrations

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// grantWALDir lets the owner role list pg_wal (pg_ls_waldir(): names, sizes
// and times of the files, never their content), so that
// idem.timeline_switch can tell operators when the primary was promoted. Only
// a superuser can grant it; another login installing the schema leaves it
// out, and idemctl doctor says so.
func grantWALDir(ctx context.Context, conn *pgx.Conn, r Roles) error {
	var super bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
		return fmt.Errorf("grant pg_ls_waldir: %w", err)
	}
	if !super {
		return nil
	}
	if _, err := conn.Exec(ctx, "GRANT EXECUTE ON FUNCTION pg_catalog.pg_ls_waldir() TO "+pgx.Identifier{r.Owner}.Sanitize()); err != nil {
		return fmt.Errorf("grant pg_ls_waldir to %s: %w", r.Owner, err)
	}
	return nil
}
