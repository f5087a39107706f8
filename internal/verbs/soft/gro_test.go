//go:build linux

package soft

import (
	"bytes"
	"os"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// groRun, driven without a socket: how a coalesced read of n bytes with
// segment size seg splits into datagrams.
func TestGRORunSplit(t *testing.T) {
	tests := []struct {
		name string
		n    int
		seg  int
		want []int // each datagram's length
	}{
		{"empty", 0, 100, nil},
		{"not coalesced (no UDP_GRO)", 300, 0, []int{300}},
		{"one segment, seg equal to the read", 300, 300, []int{300}},
		{"seg over the read", 300, 400, []int{300}},
		{"equal segments", 400, 100, []int{100, 100, 100, 100}},
		{"last one shorter", 350, 100, []int{100, 100, 100, 50}},
		{"last one a byte", 201, 100, []int{100, 100, 1}},
		{"segments of a byte", 3, 1, []int{1, 1, 1}}, // not RoCE, but any UDP sender's to the port
		{"64 segments of a 64 B datagram", 64 * 88, 88, repeat(64, 88)},
		{"15 of 4 KiB and a short one", 15*4120 + 24, 4120, append(repeat(15, 4120), 24)},
		{"negative seg is no segmentation", 50, -1, []int{50}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := make([]byte, tt.n)
			for i := range data {
				data[i] = byte(i)
			}
			r := groRun{data: data, seg: tt.seg}
			if got := r.left(); got != len(tt.want) {
				t.Fatalf("left() = %d, want %d", got, len(tt.want))
			}
			off := 0
			for i, w := range tt.want {
				d, ok := r.next()
				if !ok || len(d) != w {
					t.Fatalf("datagram %d: %d bytes (ok %v), want %d", i, len(d), ok, w)
				}
				if !bytes.Equal(d, data[off:off+w]) {
					t.Fatalf("datagram %d is not bytes %d-%d of the read", i, off, off+w)
				}
				off += w
				if got := r.left(); got != len(tt.want)-i-1 {
					t.Fatalf("after %d: left() = %d, want %d", i+1, got, len(tt.want)-i-1)
				}
			}
			if d, ok := r.next(); ok {
				t.Fatalf("a datagram past the last: %d bytes", len(d))
			}
		})
	}
}

func repeat(n, v int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// groSeg and parseCmsgs find the segment size among other control
// messages, and ignore what is malformed.
func TestGROSegCmsg(t *testing.T) {
	put := func(b []byte, level, typ int32, v uint32) []byte {
		c := make([]byte, unix.CmsgSpace(4))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
		h.Level, h.Type = level, typ
		h.SetLen(unix.CmsgLen(4))
		*(*uint32)(unsafe.Pointer(&c[unix.CmsgLen(0)])) = v
		return append(b, c...)
	}
	var b []byte
	b = put(b, unix.IPPROTO_IP, unix.IP_TTL, 64)
	b = put(b, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 7)
	b = put(b, unix.SOL_UDP, unix.UDP_GRO, 1048)
	if got := groSeg(b); got != 1048 {
		t.Errorf("groSeg = %d, want 1048", got)
	}
	var m rxMeta
	parseCmsgs(b, &m)
	if m.seg != 1048 || m.ttl != 64 || !m.hasOvfl || m.ovfl != 7 {
		t.Errorf("parseCmsgs = %+v, want seg 1048, ttl 64, ovfl 7", m)
	}
	if got := groSeg(b[:unix.CmsgSpace(4)*2]); got != 0 {
		t.Errorf("without UDP_GRO: groSeg = %d, want 0", got)
	}
	bad := append([]byte(nil), b...)
	(*unix.Cmsghdr)(unsafe.Pointer(&bad[0])).Len = 1 << 20 // longer than the buffer
	if got := groSeg(bad); got != 0 {
		t.Errorf("malformed: groSeg = %d, want 0", got)
	}
	if got := groSeg(nil); got != 0 {
		t.Errorf("no control messages: groSeg = %d, want 0", got)
	}
}

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
// first included, and past 8 free ones (the package doc's) an area given
// back drops its pages.
func TestGROPoolGivesBack(t *testing.T) {
	const keep = 8 // written out, not groPoolKeep: the test pins it
	// Take every free area, then new ones until keep+2 are held.
	var held []*groArea
	for {
		groPool.mu.Lock()
		nfree := groPool.nfree
		groPool.mu.Unlock()
		if nfree == 0 && len(held) >= keep+2 {
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
		if want := i < keep; resident(a) != want {
			t.Errorf("area given back %d of %d (keep %d): resident %v, want %v", i+1, len(held), keep, !want, want)
		}
	}
}

// TestGROPoolTakesFreeFirst: an area is mapped only when none is free
// (groPool: a process maps as many as it has concurrent reads). With one
// area given back, taking as many as are free takes that one first and
// every other free one, and makes none.
func TestGROPoolTakesFreeFirst(t *testing.T) {
	a, err := getGROArea()
	if err != nil {
		t.Fatalf("getGROArea: %v", err)
	}
	putGROArea(a)
	groPool.mu.Lock()
	made, nfree := groPool.made, groPool.nfree
	groPool.mu.Unlock()
	var held []*groArea
	defer func() {
		for _, b := range held {
			putGROArea(b)
		}
	}()
	for range nfree {
		b, err := getGROArea()
		if err != nil {
			t.Fatalf("getGROArea: %v", err)
		}
		held = append(held, b)
	}
	groPool.mu.Lock()
	madeAfter, nfreeAfter := groPool.made, groPool.nfree
	groPool.mu.Unlock()
	if nfreeAfter != 0 || madeAfter != made {
		t.Errorf("%d areas taken of %d free: %d still free, %d made (%d before)", len(held), nfree, nfreeAfter, madeAfter, made)
	}
	if held[0] != a {
		t.Errorf("the take after a give-back did not take the area given back")
	}
}

// A GRO area's rows tile it: row i is groRow bytes from i*groRow, its
// own, and the last ends at the area's end, so a read of 64 slots (the
// package doc's most a read takes) has a row for each (a slot's overflow
// never runs into the next slot's); a row is the package doc's "68 KiB
// row".
func TestGRORowsTileTheArea(t *testing.T) {
	const slots = 64 // written out, not recvBatch: the test pins it
	a, err := getGROArea()
	if err != nil {
		t.Fatalf("getGROArea: %v", err)
	}
	defer putGROArea(a)
	if len(a.mem) != slots*groRow {
		t.Fatalf("area of %d bytes, want %d rows of %d", len(a.mem), slots, groRow)
	}
	for i := range slots {
		var r []byte
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("row(%d): %v", i, p)
				}
			}()
			r = a.row(i)
		}()
		if len(r) != groRow {
			t.Fatalf("row(%d): %d bytes, want %d", i, len(r), groRow)
		}
		if off := uintptr(unsafe.Pointer(&r[0])) - uintptr(unsafe.Pointer(&a.mem[0])); off != uintptr(i*groRow) {
			t.Fatalf("row(%d) at offset %d, want %d", i, off, i*groRow)
		}
	}
	if kib := len(a.row(0)) >> 10; kib != 68 {
		t.Errorf("a row of %d KiB, want the package doc's 68", kib)
	}
}

// Where a GRO area cannot be mapped (here RLIMIT_AS leaves a megabyte of
// address space, where an area takes 4 MiB), getGROArea fails with
// mmap's errno and hands out no area; with the limit raised again the
// pool maps one as before. In a child process: the limit is the whole
// process's, and nothing but this test's areas may come from the pool.
func TestGROAreaMapFails(t *testing.T) {
	if !testenv.InChild(t) {
		return
	}
	statm, err := os.ReadFile("/proc/self/statm")
	require.NoError(t, err)
	pages, err := strconv.ParseUint(string(bytes.Fields(statm)[0]), 10, 64)
	require.NoError(t, err)
	var old unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_AS, &old))
	lim := old
	lim.Cur = pages*uint64(unix.Getpagesize()) + 1<<20
	require.Less(t, lim.Cur-pages*uint64(unix.Getpagesize()), uint64(recvBatch*groRow))
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_AS, &lim))
	a, err := getGROArea()
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_AS, &old))
	require.ErrorIs(t, err, unix.ENOMEM, "getGROArea under RLIMIT_AS")
	require.Nil(t, a)

	a, err = getGROArea()
	require.NoError(t, err)
	require.Len(t, a.mem, recvBatch*groRow)
	putGROArea(a)
}

// At most 64 GRO areas stay mapped (the package doc's): with every area
// of the pool in use, a take maps one more, which is unmapped when given
// back, while the pool's own stay mapped for the next reads.
func TestGROPoolMapsAtMost64(t *testing.T) {
	const most = 64 // written out, not groPoolMax: the test pins it
	groPool.mu.Lock()
	inUse := groPool.made - groPool.nfree // held elsewhere (none, run alone)
	groPool.mu.Unlock()
	var held []*groArea
	defer func() {
		for _, a := range held {
			putGROArea(a)
		}
	}()
	for range most - inUse + 2 {
		a, err := getGROArea()
		if err != nil {
			t.Fatalf("getGROArea with %d held: %v", len(held), err)
		}
		held = append(held, a)
	}
	taken := held
	held = nil
	for i, a := range taken {
		mem := a.mem
		putGROArea(a)
		vec := make([]byte, 1)
		_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(mem))), uintptr(unix.Getpagesize()), uintptr(unsafe.Pointer(&vec[0])))
		if e != 0 && e != unix.ENOMEM {
			t.Fatalf("mincore: %v", e)
		}
		mapped := e == 0 // ENOMEM: nothing mapped there
		if want := i < len(taken)-2; mapped != want {
			t.Errorf("area %d of %d taken (%d held elsewhere): mapped %v after its give-back, want %v", i+1, len(taken), inUse, mapped, want)
		}
	}
}
