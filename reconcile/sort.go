package reconcile

import (
	"bufio"
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unsafe"
)

// DefaultChunkBytes is how much of a report is held in memory to be sorted:
// two chunks of half this, one filling while the other is sorted and written
// to a run file. The Go heap peaks at about three times this (the chunks,
// the garbage of reading them, and the collector's headroom), whatever the
// report's size (BENCHMARKS.md).
const DefaultChunkBytes = 16 << 20

// record is one report line as the merge needs it: its identity, its line,
// the compared values, and why it cannot be used ("" when it can). A line
// whose identity could not be read never becomes a record.
type record struct {
	tenant, op string
	line       int64
	values     []string
	invalid    string
	// kind is the row's kind when it reverses the operation (a refund, a
	// chargeback); "" for the operation's own row.
	kind string
}

// size is the memory a record holds, roughly: the struct twice (the chunk's
// slice grows by doubling), the headers of its values and its text.
func (r *record) size() int {
	n := 2*int(unsafe.Sizeof(*r)) + len(r.tenant) + len(r.op) + len(r.invalid) + len(r.kind)
	for _, v := range r.values {
		n += int(unsafe.Sizeof(v)) + len(v)
	}
	return n
}

// compareRecords orders by identity (bytes, as PostgreSQL's "C" collation
// does), then by line.
func compareRecords(a, b *record) int {
	if c := compareKey(a.tenant, a.op, b.tenant, b.op); c != 0 {
		return c
	}
	return cmp.Compare(a.line, b.line)
}

func compareKey(t1, o1, t2, o2 string) int {
	// strings.Compare is one comparison of the bytes; cmp.Compare makes two.
	if t1 != t2 {
		return strings.Compare(t1, t2)
	}
	return strings.Compare(o1, o2)
}

// byRecord sorts records in place by compareRecords. Less compares the
// records where they are: slices.SortFunc's comparison takes two copies of
// the 96-byte records, and measured 1.5-2x slower on 200,000 records.
type byRecord []record

func (s byRecord) Len() int           { return len(s) }
func (s byRecord) Less(i, j int) bool { return compareRecords(&s[i], &s[j]) < 0 }
func (s byRecord) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }

// sorter sorts records by identity with bounded memory: chunks of at most
// half the limit are sorted in memory and, when there is more than one,
// written to run files in dir and merged. A full chunk is sorted and written
// by a goroutine while the next one fills (two chunks at most: the limit
// holds).
type sorter struct {
	dir   string
	limit int
	chunk []record
	bytes int
	runs  []string
	buf   []byte // the spilling goroutine's scratch (one at a time)
	// spilling answers when the chunk in flight is written; spare is the
	// chunk the last spill gave back, to be filled again.
	spilling chan error
	inflight []record
	spare    []record
}

func newSorter(dir string, limit int) *sorter {
	if limit <= 0 {
		limit = DefaultChunkBytes
	}
	return &sorter{dir: dir, limit: limit}
}

// add takes one record.
func (s *sorter) add(r record) error {
	s.chunk = append(s.chunk, r)
	s.bytes += r.size()
	if 2*s.bytes >= s.limit {
		return s.spill()
	}
	return nil
}

// spill hands the chunk to a goroutine that sorts it and writes it to a new
// run file, once the previous one is written.
func (s *sorter) spill() error {
	if err := s.wait(); err != nil {
		return err
	}
	path := filepath.Join(s.dir, "run-"+strconv.Itoa(len(s.runs)))
	s.runs = append(s.runs, path)
	chunk := s.chunk
	s.inflight, s.spilling = chunk, make(chan error, 1)
	go func(done chan<- error) { done <- s.writeRun(path, chunk) }(s.spilling)
	s.chunk, s.spare, s.bytes = s.spare, nil, 0
	return nil
}

// wait waits for the chunk in flight, if any, and keeps it as the spare.
func (s *sorter) wait() error {
	if s.spilling == nil {
		return nil
	}
	err := <-s.spilling
	clear(s.inflight)
	s.spare, s.inflight, s.spilling = s.inflight[:0], nil, nil
	return err
}

// writeRun sorts a chunk and writes it to a new run file at path.
func (s *sorter) writeRun(path string, chunk []record) error {
	sort.Sort(byRecord(chunk))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("sort the report: %w", err)
	}
	w := bufio.NewWriterSize(f, 256<<10)
	for i := range chunk {
		writeRecord(w, &chunk[i], &s.buf)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("sort the report: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sort the report: %w", err)
	}
	return nil
}

// sorted returns the records in order. The iterator's files are closed by
// close; the run files are removed with the sorter's directory.
func (s *sorter) sorted() (*mergeIter, error) {
	if len(s.runs) == 0 {
		sort.Sort(byRecord(s.chunk))
		return &mergeIter{mem: s.chunk}, nil
	}
	if len(s.chunk) > 0 {
		if err := s.spill(); err != nil {
			return nil, err
		}
	}
	if err := s.wait(); err != nil {
		return nil, err
	}
	s.chunk, s.spare = nil, nil
	it := &mergeIter{}
	for _, path := range s.runs {
		f, err := os.Open(path)
		if err != nil {
			it.close()
			return nil, fmt.Errorf("sort the report: %w", err)
		}
		rr := &runReader{f: f, r: recordReader{r: bufio.NewReaderSize(f, 64<<10)}}
		it.files = append(it.files, rr)
		if err := rr.advance(); err != nil {
			it.close()
			return nil, err
		}
		if rr.ok {
			it.heap = append(it.heap, rr)
		}
	}
	heap.Init(&it.heap)
	return it, nil
}

// mergeIter yields records in order: from memory, or merged from run files.
type mergeIter struct {
	mem   []record
	files []*runReader
	heap  runHeap
}

// next returns the next record; ok is false at the end.
func (it *mergeIter) next() (rec record, ok bool, err error) {
	if it.files == nil {
		if len(it.mem) == 0 {
			return record{}, false, nil
		}
		rec, it.mem = it.mem[0], it.mem[1:]
		return rec, true, nil
	}
	if len(it.heap) == 0 {
		return record{}, false, nil
	}
	top := it.heap[0]
	rec = top.cur
	if err := top.advance(); err != nil {
		return record{}, false, err
	}
	if top.ok {
		heap.Fix(&it.heap, 0)
	} else {
		heap.Pop(&it.heap)
	}
	return rec, true, nil
}

func (it *mergeIter) close() {
	for _, rr := range it.files {
		rr.f.Close()
	}
}

// runReader reads one run file.
type runReader struct {
	f   *os.File
	r   recordReader
	cur record
	ok  bool
}

func (rr *runReader) advance() error {
	rec, err := rr.r.read()
	if err == io.EOF {
		rr.ok = false
		return nil
	}
	if err != nil {
		return fmt.Errorf("sort the report: read %s: %w", rr.f.Name(), err)
	}
	rr.cur, rr.ok = rec, true
	return nil
}

type runHeap []*runReader

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return compareRecords(&h[i].cur, &h[j].cur) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// writeRecord appends a record to a run file: the line (varint), then the
// length of the rest (uvarint) and the rest: varint-prefixed strings (tenant,
// operation, invalid, kind), the number of values and the values. buf is
// scratch space the caller keeps. Write errors surface at Flush.
func writeRecord(w *bufio.Writer, r *record, buf *[]byte) {
	b := (*buf)[:0]
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(r.tenant)
	str(r.op)
	str(r.invalid)
	str(r.kind)
	b = binary.AppendUvarint(b, uint64(len(r.values)))
	for _, v := range r.values {
		str(v)
	}
	var head [2 * binary.MaxVarintLen64]byte
	h := binary.PutVarint(head[:], r.line)
	h += binary.PutUvarint(head[h:], uint64(len(b)))
	w.Write(head[:h])
	w.Write(b)
	*buf = b
}

// errCorruptRun: a run file does not read back as written.
var errCorruptRun = errors.New("corrupt sort run")

// recordReader reads a run file's records back: one string allocation per
// record, the strings of its fields slices of it, and its values carved
// from a shared slab.
type recordReader struct {
	r    *bufio.Reader
	buf  []byte
	slab []string
}

func (rr *recordReader) read() (record, error) {
	line, err := binary.ReadVarint(rr.r)
	if err != nil {
		return record{}, err // io.EOF at a record boundary: the end
	}
	size, err := binary.ReadUvarint(rr.r)
	if err != nil || size > 1<<30 {
		return record{}, errCorruptRun
	}
	if cap(rr.buf) < int(size) {
		rr.buf = make([]byte, size)
	}
	rr.buf = rr.buf[:size]
	if _, err := io.ReadFull(rr.r, rr.buf); err != nil {
		return record{}, errCorruptRun
	}
	text := string(rr.buf)
	pos := 0
	uvarint := func() (uint64, bool) {
		n, k := binary.Uvarint(rr.buf[pos:])
		if k <= 0 {
			return 0, false
		}
		pos += k
		return n, true
	}
	str := func() (string, bool) {
		n, ok := uvarint()
		if !ok || n > uint64(len(text)-pos) {
			return "", false
		}
		s := text[pos : pos+int(n)]
		pos += int(n)
		return s, true
	}
	rec := record{line: line}
	for _, dst := range [...]*string{&rec.tenant, &rec.op, &rec.invalid, &rec.kind} {
		var ok bool
		if *dst, ok = str(); !ok {
			return record{}, errCorruptRun
		}
	}
	n, ok := uvarint()
	if !ok || n > 1<<16 {
		return record{}, errCorruptRun
	}
	if int(n) > len(rr.slab) {
		rr.slab = make([]string, max(int(n), 4096))
	}
	rec.values, rr.slab = rr.slab[:n:n], rr.slab[n:]
	for i := range rec.values {
		if rec.values[i], ok = str(); !ok {
			return record{}, errCorruptRun
		}
	}
	if pos != len(text) {
		return record{}, errCorruptRun
	}
	return rec, nil
}
