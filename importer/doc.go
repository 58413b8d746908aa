// Package importer adopts an existing idempotency store (rocket-rides'
// idempotency_keys, an HTTP middleware's table, an NDJSON export) into a
// class's inbox through a four-eyes entry plan of kind 'import': it reads
// the store streaming, classifies its rows (finished: to import;
// unfinished, locked or without a response: ambiguous, for idemctl resolve;
// unreadable: invalid, with the reason), and copies the rows to import into
// the plan's stage in the database, which checks, digests and seals them
// (on Citus: fills the plan with a fingerprint an item). Run enters the
// sealed stage by chunks, each its own transaction, as the schema owner.
package importer
