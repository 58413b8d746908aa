package recovery

import (
	"context"
	"hash/maphash"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/idem"
)

// SetAfterSend installs a hook that runs between sending an operation's
// pipeline and reading its results, to break connections at that instant.
func SetAfterSend(r *Resolver, f func(ctx context.Context, conn *pgx.Conn, id idem.Identity)) {
	r.afterSend = f
}

// LookupSQL is the batched lookup, and ProbeOnlySQL what runs before it in
// its transaction, for plan tests.
var LookupSQL, ProbeOnlySQL = lookupSQL, probeOnlySQL

// CollideIdentities makes r's input scan give every identity one of n
// hashes, so that identities share them.
func CollideIdentities(r *Resolver, n uint64) {
	r.idHash = func(seed maphash.Seed, tenant, operationID string) uint64 {
		return identityKey(seed, tenant, operationID) % n
	}
}
