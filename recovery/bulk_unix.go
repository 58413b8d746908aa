//go:build linux || darwin || freebsd || netbsd || openbsd

package recovery

import "syscall"

// bulkAlloc returns size bytes of zeroed memory from an anonymous mapping
// (mapped), or from the heap when the system refuses one.
func bulkAlloc(size int) (mem []byte, mapped bool) {
	if size == 0 {
		return nil, false
	}
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]byte, size), false
	}
	return mem, true
}

// bulkFree unmaps what bulkAlloc mapped.
func bulkFree(mem []byte) {
	_ = syscall.Munmap(mem)
}
