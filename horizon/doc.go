// Package horizon purges the inbox only behind a proven replay horizon (brief
// rule 9, step 5 of the recovery protocol): every replay source (outbox and
// DLQ tables, archives, NATS and Kafka DLQs, pending manual corrections) is
// probed, the proof is recorded with a plan, a second operator approves it
// (four-eyes), and the purge re-probes before it removes anything. A purged
// identity leaves a tombstone, so that a late replay is answered "purged" (or
// quarantined as a conflict) and never runs again.
//
// Storage (migrations/004_horizon.sql): idem.identity holds every identity and
// is the tombstone after a purge; idem.inbox_body (payload, response) is
// partitioned by day, so a purge drops whole days where it can and deletes in
// bounded batches elsewhere. This package never imports cobra or bubbletea.
package horizon
