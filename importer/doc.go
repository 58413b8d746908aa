// Package importer adopts an existing idempotency store (rocket-rides'
// idempotency_keys, an HTTP middleware's table, an NDJSON export) into a
// class's inbox through a four-eyes entry plan of kind 'import': it reads
// the store streaming, classifies its rows (finished: to import;
// unfinished, locked or without a response: ambiguous, for idemctl resolve;
// unreadable: invalid, with the reason), and fills and seals the plan with
// the source's digest, counts, sample and cursor. The database checks every
// item again and runs the plan as the schema owner (governance.RunEntry).
package importer
