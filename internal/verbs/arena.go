package verbs

import (
	"fmt"
	"os"
)

// Arena is memory allocated outside the Go heap (an anonymous mmap), so it
// never moves and the garbage collector never frees it while a device may
// write it. Register it once with QP.RegisterMemory and carve it into
// buffers by offset.
type Arena struct {
	buf []byte
}

// NewArena maps size bytes, rounded up to whole pages.
func NewArena(size int) (*Arena, error) {
	if size <= 0 {
		return nil, fmt.Errorf("verbs: arena size %d must be positive", size)
	}
	pg := os.Getpagesize()
	size = (size + pg - 1) &^ (pg - 1)
	b, err := mmapAnon(size)
	if err != nil {
		return nil, fmt.Errorf("verbs: mmap arena of %d bytes: %w", size, err)
	}
	return &Arena{buf: b}, nil
}

// Bytes returns the whole arena. The slice is invalid after Free.
func (a *Arena) Bytes() []byte { return a.buf }

// Len is the arena's size in bytes.
func (a *Arena) Len() int { return len(a.buf) }

// Slice returns n bytes at off.
func (a *Arena) Slice(off, n uint32) []byte { return a.buf[off : off+n : off+n] }

// Free unmaps the arena. Deregister every MR over it first.
func (a *Arena) Free() error {
	if a.buf == nil {
		return nil
	}
	err := munmap(a.buf)
	a.buf = nil
	return err
}
