// Package reconcile compares one class's inbox with an external system of
// record (a payment provider's or a bank's settlement report) and turns what
// the replay sources hold into resolve batches (intake). The CLI
// (`idemctl reconcile`, `idemctl intake`) and the TUI's reconcile view are two
// faces over it; it imports neither cobra nor bubbletea.
//
// A report is streamed once (CSV with a header, or NDJSON, gzip accepted) and
// its lines sorted by identity on disk in bounded chunks; the inbox is read
// as a sorted stream from a server-side cursor; the two are merged. Report
// lines whose identity is not in the window are looked up in batches. Memory
// is bounded by the chunk size and the batch size, never by the report.
package reconcile
