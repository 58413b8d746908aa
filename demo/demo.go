// Package demo installs a small ledger (schema demo) and its operation class
// demo.transfer, so that idemctl can be shown end to end on an empty database.
package demo

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5"
)

//go:embed demo.sql
var installSQL string

// Class is the demo's operation class.
const Class = "demo.transfer"

// Install creates the demo schema and registers demo.transfer. It is safe to run
// again and needs the idem schema to be migrated first.
func Install(ctx context.Context, conn *pgx.Conn) error {
	var migrated bool
	if err := conn.QueryRow(ctx, "SELECT to_regprocedure('idem.register_class(text,regprocedure,text,text)') IS NOT NULL").Scan(&migrated); err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if !migrated {
		return fmt.Errorf("schema idem is not migrated: run idemctl migrate first")
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// Serialise concurrent installs the same way migrations are serialised.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('idemctl demo init'))"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, installSQL); err != nil {
			return fmt.Errorf("install demo ledger: %w", err)
		}
		return nil
	})
}

// SQL returns the demo ledger's install script (the lab installs it into its
// scratch schemas).
func SQL() string { return installSQL }

// Digest identifies the demo schema's content; tests use it to name templates.
func Digest() string {
	sum := sha256.Sum256([]byte(installSQL))
	return hex.EncodeToString(sum[:])[:8]
}
