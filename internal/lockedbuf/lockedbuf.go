// Package lockedbuf is a bytes.Buffer that one goroutine may write while
// another reads it: the stderr of a process a test runs and watches.
package lockedbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for one writer and concurrent readers.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
