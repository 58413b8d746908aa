// Package idem is idemctl's core: the identity of an operation
// (tenant_id, operation_id), the RFC 8785 canonical payload hash, and the atomic
// executor that commits the inbox row, the business effect and the saved
// response in one transaction.
//
// The protocol itself lives in PostgreSQL (idem.claim, idem.complete,
// idem.execute in migrations/001_core.sql) so that services in any language and
// idemctl share one implementation; this package prepares requests, calls those
// functions and maps their errors to Go values.
package idem
