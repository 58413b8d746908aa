// Package recovery is idemctl's main job: the five-step recovery protocol for
// operations whose outcome is ambiguous. For each operation it checks that the
// database is the authoritative primary, then settles the identity through the
// atomic executor (idem.execute): already applied (the saved response),
// applied now, or a conflict quarantined with its evidence. A dry run answers
// the same question with batched read-only lookups and writes nothing.
//
// Input is streamed (NDJSON, one operation a line) and results come out in
// input order through a bounded reorder window, so memory stays flat however
// long the file is.
package recovery
