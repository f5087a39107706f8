package verbs

import "golang.org/x/sys/unix"

func mmapAnon(size int) ([]byte, error) {
	return unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}

func munmap(b []byte) error { return unix.Munmap(b) }
