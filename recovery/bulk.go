package recovery

import "unsafe"

// bulk is a growable array of pointer-free entries held, where the platform
// allows, outside the Go heap (bulk_unix.go: an anonymous mapping, returned
// to the system by release). The input scan's entries of a million-line
// input are tens of MiB: on the heap they would count towards the
// collector's goal and cost about twice their size in resident memory
// (GOGC 100); here they cost their size, once. T must hold no pointers
// (the collector does not see this memory).
type bulk[T any] struct {
	mem    []byte
	mapped bool
	items  []T
}

// reserve makes room for n entries in all, keeping those there.
func (b *bulk[T]) reserve(n int) {
	if n <= cap(b.items) {
		return
	}
	var zero T
	mem, mapped := bulkAlloc(n * int(unsafe.Sizeof(zero)))
	items := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(mem))), n)[:len(b.items)]
	copy(items, b.items)
	b.release()
	b.mem, b.mapped, b.items = mem, mapped, items
}

// push appends v, doubling the room when it is full.
func (b *bulk[T]) push(v T) {
	if len(b.items) == cap(b.items) {
		b.reserve(max(4096, 2*cap(b.items)))
	}
	b.items = append(b.items, v) // within capacity: stays in mem
}

// release returns the memory; the entries are gone.
func (b *bulk[T]) release() {
	if b.mapped {
		bulkFree(b.mem)
	}
	b.mem, b.mapped, b.items = nil, false, nil
}
