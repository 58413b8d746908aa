package reconcile

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrFileExists: an output file exists and replacing it was not asked for.
var ErrFileExists = errors.New("the file exists")

// BatchLine is one line of a resolve batch, the NDJSON `idemctl resolve
// --file` reads: {"tenant", "operation_id", "class", "payload", "transport"},
// and a note for the person who reads it. A nil Payload is written as null:
// resolve refuses that line until someone fills in the payload.
type BatchLine struct {
	Tenant      string          `json:"tenant"`
	OperationID string          `json:"operation_id"`
	Class       string          `json:"class"`
	Payload     json.RawMessage `json:"payload"`
	Transport   json.RawMessage `json:"transport,omitempty"`
	Note        string          `json:"note,omitempty"`
}

// BatchWriter writes a resolve batch, one line a call.
type BatchWriter struct {
	w *bufio.Writer
	n int64
}

// NewBatchWriter writes a batch to w; Flush ends it.
func NewBatchWriter(w io.Writer) *BatchWriter {
	return &BatchWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

// Write appends one line.
func (b *BatchWriter) Write(l BatchLine) error {
	if err := b.WriteValue(l); err != nil {
		return fmt.Errorf("resolve batch line %s/%s: %w", l.Tenant, l.OperationID, err)
	}
	return nil
}

// WriteValue appends one line holding v as JSON (a record plan's line).
func (b *BatchWriter) WriteValue(v any) error {
	out, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := b.w.Write(append(out, '\n')); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	b.n++
	return nil
}

// Lines is how many lines were written.
func (b *BatchWriter) Lines() int64 { return b.n }

// Flush writes what is buffered.
func (b *BatchWriter) Flush() error {
	if err := b.w.Flush(); err != nil {
		return fmt.Errorf("write the resolve batch: %w", err)
	}
	return nil
}

// BatchFile is a resolve batch written to a file that appears only when the
// run succeeds: the lines go to a temporary file beside it, and Commit moves
// it into place (never over an existing file unless overwrite). Abort, or
// a run that never commits, leaves nothing behind.
type BatchFile struct {
	*BatchWriter
	path      string
	tmp       *os.File
	overwrite bool
	done      bool
}

// CreateBatchFile starts a batch file at path; an existing file is refused
// (ErrFileExists) unless overwrite.
func CreateBatchFile(path string, overwrite bool) (*BatchFile, error) {
	if !overwrite {
		if _, err := os.Lstat(path); err == nil {
			return nil, fmt.Errorf("%w: %s (give --overwrite to replace it)", ErrFileExists, path)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.partial")
	if err != nil {
		return nil, fmt.Errorf("create the resolve batch: %w", err)
	}
	return &BatchFile{BatchWriter: NewBatchWriter(tmp), path: path, tmp: tmp, overwrite: overwrite}, nil
}

// Path is where the batch goes.
func (b *BatchFile) Path() string { return b.path }

// Commit flushes the batch and moves it into place.
func (b *BatchFile) Commit() error {
	if b.done {
		return nil
	}
	b.done = true
	err := b.Flush()
	if cerr := b.tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
	case b.overwrite:
		err = os.Rename(b.tmp.Name(), b.path)
	default:
		// A link never replaces a file that appeared meanwhile.
		if err = os.Link(b.tmp.Name(), b.path); errors.Is(err, os.ErrExist) {
			err = fmt.Errorf("%w: it appeared during the run (give --overwrite to replace it)", ErrFileExists)
		}
	}
	os.Remove(b.tmp.Name())
	if err != nil {
		return fmt.Errorf("write the resolve batch %s: %w", b.path, err)
	}
	return nil
}

// Abort removes the temporary file; nothing is left at path.
func (b *BatchFile) Abort() {
	if b == nil || b.done {
		return
	}
	b.done = true
	b.tmp.Close()
	os.Remove(b.tmp.Name())
}
