//go:build linux

package soft

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// setGRO turns the socket's UDP_GRO on and off, as getsockopt shows.
func TestSetGROReachesTheSocket(t *testing.T) {
	if groOff {
		t.Skip("groOff: GRO kept off")
	}
	q := internalQP(t, verbs.QPConfig{GRO: true})
	c := &q.rcq
	for _, s := range []int{0, 1} {
		fd := [2]int{q.mcFd, q.uniFd}[s]
		for _, on := range []bool{true, false, true, false} {
			c.mu.Lock()
			c.setGRO(s, on)
			c.mu.Unlock()
			v, err := unix.GetsockoptInt(fd, unix.SOL_UDP, unix.UDP_GRO)
			if err != nil {
				t.Skipf("getsockopt UDP_GRO: %v", err)
			}
			if want := map[bool]int{false: 0, true: 1}[on]; v != want || c.gro.active[s] != on {
				t.Fatalf("socket %d: setGRO(%v): UDP_GRO %d, active %v; want %d, %v", s, on, v, c.gro.active[s], want, on)
			}
		}
	}
}

// A UDP_GRO control message too short for its int is no segment size.
func TestGROSegShortCmsg(t *testing.T) {
	b := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_GRO
	*(*uint32)(unsafe.Pointer(&b[unix.CmsgLen(0)])) = 1048
	h.SetLen(unix.CmsgLen(3))
	if got := groSeg(b); got != 0 {
		t.Errorf("UDP_GRO of 3 bytes: groSeg = %d, want 0", got)
	}
	h.SetLen(unix.CmsgLen(4))
	if got := groSeg(b); got != 1048 {
		t.Errorf("UDP_GRO of 4 bytes: groSeg = %d, want 1048", got)
	}
}

// The GRO area pool: every area given back is free again, the pool's
// first included, and past groPoolKeep free ones an area given back drops
// its pages.
func TestGROPoolGivesBack(t *testing.T) {
	// Take every free area, then new ones until groPoolKeep+2 are held.
	var held []*groArea
	for {
		groPool.mu.Lock()
		nfree := groPool.nfree
		groPool.mu.Unlock()
		if nfree == 0 && len(held) >= groPoolKeep+2 {
			break
		}
		a, err := getGROArea()
		if err != nil {
			t.Fatalf("getGROArea: %v", err)
		}
		held = append(held, a)
	}
	first := &groPool.areas[0]
	hasFirst := false
	for _, a := range held {
		hasFirst = hasFirst || a == first
		for off := 0; off < len(a.mem); off += unix.Getpagesize() {
			a.mem[off] = 1 // resident
		}
	}
	if !hasFirst {
		t.Fatalf("the pool's first area is held elsewhere (%d made)", groPool.made)
	}
	for _, a := range held {
		putGROArea(a)
	}
	groPool.mu.Lock()
	nfree := groPool.nfree
	free := map[*groArea]bool{}
	for _, a := range groPool.free[:nfree] {
		free[a] = true
	}
	groPool.mu.Unlock()
	if nfree != len(held) {
		t.Errorf("%d areas given back, %d free", len(held), nfree)
	}
	for i, a := range held {
		if !free[a] {
			t.Errorf("area %d (the pool's %d) given back but not free", i, (uintptr(unsafe.Pointer(a))-uintptr(unsafe.Pointer(first)))/unsafe.Sizeof(*a))
		}
	}
	resident := func(a *groArea) bool {
		vec := make([]byte, 1)
		_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&a.mem[0])), uintptr(unix.Getpagesize()), uintptr(unsafe.Pointer(&vec[0])))
		if e != 0 {
			t.Fatalf("mincore: %v", e)
		}
		return vec[0]&1 != 0
	}
	for i, a := range held {
		if want := i < groPoolKeep; resident(a) != want {
			t.Errorf("area given back %d of %d (keep %d): resident %v, want %v", i+1, len(held), groPoolKeep, !want, want)
		}
	}
}
