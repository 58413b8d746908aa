package reconcile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// spool keeps records on disk in the order they come, to be read back once:
// the invalid lines without an identity (emitted after the whole report has
// been read) and the pins (recorded only once the run has succeeded).
type spool struct {
	f   *os.File
	w   *bufio.Writer
	n   int64
	buf []byte
}

func newSpool(dir, name string) (*spool, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	return &spool{f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

func (s *spool) add(r *record) error {
	writeRecord(s.w, r, &s.buf)
	s.n++
	if s.w.Buffered() > 32<<10 {
		if err := s.w.Flush(); err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
	}
	return nil
}

// each reads every record back, in order.
func (s *spool) each(fn func(*record) error) error {
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	r := recordReader{r: bufio.NewReaderSize(s.f, 64<<10)}
	for {
		rec, err := r.read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reconcile: read back %s: %w", s.f.Name(), err)
		}
		if err := fn(&rec); err != nil {
			return err
		}
	}
}

func (s *spool) close() { s.f.Close() }
