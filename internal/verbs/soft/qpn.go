//go:build linux

package soft

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// QPNs are unique in the network namespace. A process reserves them in
// blocks of qpnBlockSize, each held by one abstract unix socket
// "rdmanet-sw-qpns-%04x" (abstract names are per network namespace, and
// the kernel frees one when its socket closes, also when the process
// dies), and hands them out from its blocks in the same namespace (told
// by its cookie): a conn costs no fd of its own for its QPN, and Listen
// no bind while a block has room. Within a block QPNs are handed out in
// turn, so one freed is taken again only after the block's others. Of
// the blocks that empty, the process keeps the last one (a Listen+Close
// loop binds nothing), and closes the others.
const (
	qpnBlockBits = 8
	qpnBlockSize = 1 << qpnBlockBits
	qpnBlocks    = 1 << (24 - qpnBlockBits)
	maxQPNTries  = 256 // blocks tried before giving up
)

// qpnBlock is one reserved block: QPNs base .. base+qpnBlockSize-1.
type qpnBlock struct {
	fd    int    // the socket that reserves it
	netns uint64 // in this network namespace (its cookie; 0: unknown)
	base  uint32
	used  [qpnBlockSize / 64]uint64
	n     int // QPNs handed out
	next  int // where the search for a free one starts
}

// qpnPool is the process's blocks.
var qpnPool struct {
	mu     sync.Mutex
	blocks []*qpnBlock
}

// usable reports whether QPN base+i may be handed out: 0, 1 and
// 0xFFFFFF (the multicast QPN) may not.
func (b *qpnBlock) usable(i int) bool {
	q := b.base + uint32(i)
	return q >= 2 && q <= 0xFFFFFE && b.used[i/64]&(1<<(i%64)) == 0
}

// take hands out the block's next free QPN; ok is false when it is full.
func (b *qpnBlock) take() (uint32, bool) {
	for k := range qpnBlockSize {
		i := (b.next + k) % qpnBlockSize
		if b.usable(i) {
			b.used[i/64] |= 1 << (i % 64)
			b.n++
			b.next = (i + 1) % qpnBlockSize
			return b.base + uint32(i), true
		}
	}
	return 0, false
}

// reserveQPN hands out a QPN free in the network namespace of the
// calling thread, whose cookie is netns.
func reserveQPN(netns uint64) (uint32, error) {
	qpnPool.mu.Lock()
	defer qpnPool.mu.Unlock()
	for _, b := range qpnPool.blocks {
		if b.netns != netns {
			continue
		}
		if q, ok := b.take(); ok {
			return q, nil
		}
	}
	b, err := reserveBlock()
	if err != nil {
		return 0, err
	}
	b.netns = netns
	qpnPool.blocks = append(qpnPool.blocks, b)
	q, _ := b.take()
	return q, nil
}

// releaseQPN gives back qpn, reserved in the namespace netns. When that
// empties its block, the other empty blocks are released: only the last
// to empty stays.
func releaseQPN(netns uint64, qpn uint32) {
	qpnPool.mu.Lock()
	defer qpnPool.mu.Unlock()
	var emptied *qpnBlock
	for _, b := range qpnPool.blocks {
		if b.netns != netns || qpn>>qpnBlockBits != b.base>>qpnBlockBits {
			continue
		}
		j := int(qpn - b.base)
		b.used[j/64] &^= 1 << (j % 64)
		if b.n--; b.n == 0 {
			emptied = b
		}
		break
	}
	if emptied == nil {
		return
	}
	kept := qpnPool.blocks[:0]
	for _, b := range qpnPool.blocks {
		if b.n == 0 && b != emptied {
			unix.Close(b.fd)
			continue
		}
		kept = append(kept, b)
	}
	clear(qpnPool.blocks[len(kept):])
	qpnPool.blocks = kept
}

// drawBlock draws the block reserveBlock tries next, at random among
// qpnBlocks; tests replace it.
var drawBlock = func() uint32 { return rand.Uint32N(qpnBlocks) }

// reserveBlock binds a random free block's name.
func reserveBlock() (*qpnBlock, error) {
	for range maxQPNTries {
		blk := drawBlock()
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("reserve QPNs: %w", os.NewSyscallError("socket", err))
		}
		err = unix.Bind(fd, &unix.SockaddrUnix{Name: fmt.Sprintf("@rdmanet-sw-qpns-%04x", blk)})
		if err == nil {
			b := &qpnBlock{fd: fd, base: blk << qpnBlockBits}
			b.next = rand.IntN(qpnBlockSize)
			return b, nil
		}
		unix.Close(fd)
		if err != unix.EADDRINUSE {
			return nil, fmt.Errorf("reserve QPNs: %w", os.NewSyscallError("bind", err))
		}
	}
	return nil, errors.New("reserve QPNs: no free QPN block found")
}
