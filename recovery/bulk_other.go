//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package recovery

// bulkAlloc returns size bytes from the heap: this platform's entries stay
// there (see bulk).
func bulkAlloc(size int) (mem []byte, mapped bool) {
	return make([]byte, size), false
}

// bulkFree is never called here: nothing is mapped.
func bulkFree([]byte) {}
