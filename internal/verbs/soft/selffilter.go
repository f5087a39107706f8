//go:build linux

package soft

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// The self filter: a QP made with BlockSelfMulticastLoopback still gets
// every multicast datagram it sends back on its multicast socket (the
// kernel loops it to every local member, and other local QPs must get
// it, so IP_MULTICAST_LOOP stays on), which costs a wake-up, a read and
// a drop per datagram. A classic BPF socket filter on the multicast
// socket drops them in the kernel instead: a datagram whose IPv4 source
// is the QP's address, whose UDP source port is 4791 (every send leaves
// the unicast socket, bound to address:4791) and whose DETH source QP is
// the QP's QPN. The QPN is needed where QPs share an address (a netdev's
// other than lo); on lo it only confirms. The user-space check
// (recvCQ.check: DropSelf) stays behind it and counts what passes.
//
// A UDP socket's filter sees the datagram from its UDP header (offset 0);
// the IPv4 header is at SKF_NET_OFF. Where attaching fails (a kernel
// without socket filters) the QP goes on without one.
//
// The kernel counts a datagram a filter drops as the socket's sk_drops
// and as UdpInErrors (not UdpRcvbufErrors). Drops.Overflow is sk_drops
// less the datagrams the QP sent to a group its multicast socket is a
// member of (selfLooped), each of which the filter dropped.

// skfNetOff is SKF_NET_OFF: loads from there on are from the network
// header.
const skfNetOff = -0x100000

// selfFilterMinLen is the shortest datagram whose DETH source QP the
// filter reads: UDP header, BTH, DETH.
const selfFilterMinLen = roce.UDPHdrSize + 12 + 8

// selfFilter is the filter dropping src:4791's datagrams from QPN qpn.
func selfFilter(src [4]byte, qpn uint32) []unix.SockFilter {
	const (
		ldAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		ldAbsH = unix.BPF_LD | unix.BPF_H | unix.BPF_ABS
		ldLen  = unix.BPF_LD | unix.BPF_W | unix.BPF_LEN
		jeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		and    = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret    = unix.BPF_RET | unix.BPF_K
	)
	ip := uint32(src[0])<<24 | uint32(src[1])<<16 | uint32(src[2])<<8 | uint32(src[3])
	netOff := func(k int32) uint32 { return uint32(skfNetOff + k) }
	// Jump offsets count from the next instruction; 9 is accept, 10 drop.
	return []unix.SockFilter{
		{Code: ldAbsW, K: netOff(12)},                  // 0: IPv4 source
		{Code: jeq, Jt: 0, Jf: 7, K: ip},               // 1
		{Code: ldAbsH, K: 0},                           // 2: UDP source port
		{Code: jeq, Jt: 0, Jf: 5, K: roce.UDPPort},     // 3
		{Code: ldLen},                                  // 4
		{Code: jge, Jt: 0, Jf: 3, K: selfFilterMinLen}, // 5
		{Code: ldAbsW, K: roce.UDPHdrSize + 12 + 4},    // 6: DETH reserved, source QP
		{Code: and, K: 0xFFFFFF},                       // 7
		{Code: jeq, Jt: 1, Jf: 0, K: qpn},              // 8
		{Code: ret, K: 0xFFFFFFFF},                     // 9: accept
		{Code: ret, K: 0},                              // 10: drop
	}
}

// attachSelfFilter attaches the self filter to fd (the multicast socket),
// reporting whether it did. A variable so that tests can do without it.
var attachSelfFilter = func(fd int, src [4]byte, qpn uint32) bool {
	prog := selfFilter(src, qpn)
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: unsafe.SliceData(prog)}
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fp) == nil
}

// selfGroups is the set of groups the multicast socket of a QP with the
// self filter is a member of, for the send path to see without c.mu.
type selfGroups struct {
	set atomic.Pointer[[][4]byte]
}

// store publishes the full-member groups of c; c.mu is held.
func (s *selfGroups) store(groups []mcGroup) {
	var set [][4]byte
	for _, g := range groups {
		if !g.sendOnly {
			set = append(set, g.addr)
		}
	}
	s.set.Store(&set)
}

// has reports whether dst is one of the groups.
func (s *selfGroups) has(dst [4]byte) bool {
	p := s.set.Load()
	if p == nil {
		return false
	}
	for _, g := range *p {
		if g == dst {
			return true
		}
	}
	return false
}

// noteSelfLooped counts the sent slots of the batch just sent (the first
// n) that went to a group the multicast socket is a member of: the filter
// dropped the copy the kernel looped back of each, into sk_drops.
func (q *QP) noteSelfLooped(n int) {
	s := &q.sq
	var k uint32
	var last [4]byte
	lastIn := false
	for i := range n {
		if s.status[i] != verbs.WCSuccess {
			continue
		}
		d := s.dst[i]
		if d[0]&0xF0 != 0xE0 {
			continue
		}
		if d != last { // last starts as 0.0.0.0, never a group
			last, lastIn = d, q.selfGroups.has(d)
		}
		if lastIn {
			k++
		}
	}
	if k > 0 {
		q.selfLooped.Add(k)
	}
}

// mcOverflow is the multicast socket's sk_drops less what the self
// filter dropped, never less than it was reported before.
func (q *QP) mcOverflow() uint32 {
	v := q.sockDrops[0].Load() - q.selfLooped.Load()
	if int32(v) < 0 {
		v = 0
	}
	for {
		old := q.mcShown.Load()
		if int32(v-old) <= 0 {
			return old
		}
		if q.mcShown.CompareAndSwap(old, v) {
			return v
		}
	}
}
