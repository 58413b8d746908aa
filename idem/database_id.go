package idem

import (
	"context"
	"fmt"
)

// DatabaseHeader is the response header in which a service built on the
// executor names the database it recorded into (DatabaseID). idemctl resolve
// compares it with the primary it reads: a service of another environment
// behind the same address is named as such, not taken for a service that
// skips its inbox.
const DatabaseHeader = "Idem-Database"

// DatabaseID returns this database's identity as idem.database_id() gives it:
// a random id stamped by migrate and a short digest of the database's name.
// Two databases never share it, a clone under another name included; it names
// no host, port or database.
func DatabaseID(ctx context.Context, q DBTX) (string, error) {
	var id string
	if err := q.QueryRow(ctx, "SELECT idem.database_id()").Scan(&id); err != nil {
		return "", fmt.Errorf("read the database identity (idem.database_id): %w", err)
	}
	return id, nil
}
