// Package demo installs a small ledger (schema demo) and its operation class
// demo.transfer, so that idemctl can be shown end to end on an empty database.
// The ledger is owned by its own role (OwnerRole), with no right on schema
// idem: the way a service's team owns the effect of its class.
package demo

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemctl/idemctl/migrations"
)

//go:embed demo.sql
var installSQL string

// Classes of the demo: Class runs its effect in SQL (demo.transfer_effect);
// AppClass runs the same transfer as application code, in the reference
// service (idemctl demo serve), which calls a fake payment provider first.
const (
	Class    = "demo.transfer"
	AppClass = "demo.transfer_app"
)

// OwnerRole owns schema demo, its tables and the effect (NOLOGIN).
const OwnerRole = "idem_demo"

// Install creates the demo ledger and registers demo.transfer. It needs the
// idem schema migrated, and a login that may create roles (the first time)
// and act as the schema owner: the one that runs idemctl migrate. It is safe
// to run again. The ledger and the registration of its classes are two
// transactions (Citus sees the ledger's grants on the workers only once they
// are committed).
func Install(ctx context.Context, conn *pgx.Conn) error {
	var migrated bool
	if err := conn.QueryRow(ctx, "SELECT to_regprocedure('idem.register_class(text,regprocedure,text,text,regclass[])') IS NOT NULL").Scan(&migrated); err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if !migrated {
		return fmt.Errorf("schema idem is not migrated: run idemctl migrate first")
	}
	r, err := migrations.InstalledRoles(ctx, conn)
	if err != nil {
		return err
	}
	var citus, onCitus bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus'), idem.citus_distributed()").
		Scan(&citus, &onCitus); err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	q := func(s string) string { return pgx.Identifier{s}.Sanitize() }
	owner := q(OwnerRole)
	// The role is created on its own, outside the transaction: Citus creates
	// a role (and a schema) on the workers only for a statement of its own.
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", OwnerRole).Scan(&exists); err != nil {
		return fmt.Errorf("install demo ledger: %w", err)
	}
	if !exists {
		var pgErr *pgconn.PgError
		if _, err := conn.Exec(ctx, "CREATE ROLE "+owner+" NOLOGIN"); err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42710") {
			return fmt.Errorf("install demo ledger: %w", err)
		}
	}
	// And the schema, so that Citus creates it on the workers before the
	// ledger's functions.
	pre := []string{"GRANT " + owner + " TO CURRENT_USER", "CREATE SCHEMA IF NOT EXISTS demo AUTHORIZATION " + owner}
	if citus {
		pre = append(pre, citusLogin)
	}
	for _, s := range pre {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("install demo ledger: %w", err)
		}
	}
	// Serialise concurrent installs the same way migrations are serialised.
	lock := "SELECT pg_advisory_xact_lock(hashtext('idemctl demo init'))"
	ledger := []string{lock,
		"SET LOCAL ROLE " + owner,
		installSQL,
		"GRANT USAGE ON SCHEMA demo TO " + q(r.Owner) + ", " + q(r.App) + ", " + q(r.Operator) + ", " + q(r.Auditor),
		"GRANT EXECUTE ON FUNCTION demo.transfer_effect(text, text, jsonb) TO " + q(r.Owner) + ", " + q(r.App),
		"GRANT SELECT ON ALL TABLES IN SCHEMA demo TO " + q(r.Operator) + ", " + q(r.Auditor),
		// The reference service (an app login) charges the provider.
		"GRANT SELECT, INSERT, UPDATE ON demo.provider_charge TO " + q(r.App),
		"RESET ROLE",
	}
	if onCitus {
		ledger = append(ledger, citusAfter...)
	}
	// The classes are registered in a transaction of their own, once the
	// ledger and its grants are committed: on Citus, writing the reference
	// table idem.op_class casts the effect's name on every worker, over the
	// schema owner's own connections there, which see the GRANT USAGE ON
	// SCHEMA demo only once it is committed (made over the ledger owner's
	// connections).
	register := []string{lock,
		"SET LOCAL ROLE " + q(r.Owner),
		`SELECT idem.register_class('demo.transfer', 'demo.transfer_effect(text,text,jsonb)'::regprocedure, 'forever',
				'demo ledger transfer: {"from","to","amount" (integer minor units),"currency"}',
				ARRAY['demo.account', 'demo.posting']::regclass[])`,
		`SELECT idem.register_class('demo.transfer_app', NULL, 'forever',
				'the demo transfer as application code: idemctl demo serve (a provider charge, then the ledger)')`,
		// Re-drives may go to the reference service on this machine.
		"SELECT idem.redrive_allow('127.0.0.1')",
		"SELECT idem.redrive_allow('localhost')",
		"RESET ROLE",
	}
	for _, steps := range [][]string{ledger, register} {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, s := range steps {
				if _, err := tx.Exec(ctx, s); err != nil {
					return fmt.Errorf("install demo ledger: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// On a Citus coordinator the ledger's role may log in, as the idem owner does
// there: Citus creates the role's functions on the workers over connections
// made as that role. Once the idem schema is distributed, the ledger is
// distributed the same way: its tables by tenant_id, co-located with
// idem.identity, so that demo.transfer's effect runs on the node of its
// tenant inside the delegated idem.execute, and the effect on every node.
var (
	citusLogin = "ALTER ROLE " + pgx.Identifier{OwnerRole}.Sanitize() + " LOGIN"
	citusAfter = []string{
		`SELECT create_distributed_table(t, 'tenant_id', colocate_with := 'idem.identity')
		 FROM unnest(ARRAY['demo.account', 'demo.posting']::regclass[]) t
		 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition d WHERE d.logicalrelid = t)`,
		`SELECT create_distributed_function('demo.transfer_effect(text,text,jsonb)'::regprocedure)
		 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_object o
		                   WHERE o.classid = 'pg_proc'::regclass AND o.objid = 'demo.transfer_effect(text,text,jsonb)'::regprocedure)`,
	}
)

// SQL returns the demo ledger's install script (the lab installs it into its
// scratch schemas).
func SQL() string { return installSQL }

// Digest identifies the demo schema's content; tests use it to name templates.
func Digest() string {
	sum := sha256.Sum256([]byte(installSQL + OwnerRole))
	return hex.EncodeToString(sum[:])[:8]
}

// Postings counts the ledger postings of one operation: a transfer applied
// once has exactly one, whatever the retries.
func Postings(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, tenant, operationID string) (int, error) {
	var n int
	err := db.QueryRow(ctx, "SELECT count(*) FROM demo.posting WHERE tenant_id = $1 AND operation_id = $2",
		tenant, operationID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count postings of %s/%s: %w", tenant, operationID, err)
	}
	return n, nil
}
