//go:build linux

package soft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// QP limits (the defaults are the model's: verbs.QPConfig.WithDefaults).
const (
	maxInline    = 4096
	recvBatch    = 64      // datagrams per recvmmsg
	sendScratch  = 64      // datagrams prepared at once (a GSO run's most: maxGSOSegs)
	sockBufBytes = 4 << 20 // SO_RCVBUF/SO_SNDBUF asked for (capped by rmem_max)
)

// QP is a software UD QP: two UDP sockets on port 4791 (a unicast one,
// bound to the QP's own address and used for every send, and a multicast
// one that sees only the QP's groups, bound to 0.0.0.0 at the first join
// to receive), a send CQ that needs no channel fd (PostSend completes
// every WR) and a receive CQ whose channel is an epoll fd over both
// sockets.
type QP struct {
	id        *ID
	qpn       uint32
	qkey      uint32
	mtu       int
	unicast   [4]byte // source address of every send; GRH source at peers
	ifindex   int
	ifaddr    [4]byte // the bound netdev's address, for IP_ADD_MEMBERSHIP
	blockSelf bool
	addrOnly  bool // GRHAddressesOnly: bare reads where they can be

	uniFd int
	mcFd  int

	mrs  atomic.Pointer[[]*mr]
	mrMu sync.Mutex

	sq  sendQueue
	scq sendCQ
	rcq recvCQ

	drops [roce.NumDropReasons]atomic.Uint64
	// sockDrops is each socket's sk_drops (multicast, unicast) as last
	// seen in SO_RXQ_OVFL or SO_MEMINFO: datagrams the kernel dropped
	// because the socket buffer was full.
	sockDrops [2]atomic.Uint32

	// The self filter (selffilter.go): whether the multicast socket has
	// it, its groups as the send path sees them, how many sent datagrams
	// it dropped, and the multicast Overflow last reported.
	selfFilter bool
	selfGroups selfGroups
	selfLooped atomic.Uint32
	mcShown    atomic.Uint32

	fault qpFault // the error state, the device counters' base (reset.go)
}

var _ verbs.QP = (*QP)(nil)

// QPN is the QP number, in [2, 0xFFFFFE] and unique in the network
// namespace: from a block of 256 the process reserved at random (qpn.go).
func (q *QP) QPN() uint32 { return q.qpn }

// QKey is the QP's Q_Key.
func (q *QP) QKey() uint32 { return q.qkey }

// MaxInline is 4096: every send is read at post time, so an inline
// payload (SendWR.Inline) goes straight from the caller's buffer.
func (q *QP) MaxInline() int { return maxInline }

// LoopbackBlocked reports whether the QP drops its own multicast sends
// coming back to it (asked for with BlockSelfMulticastLoopback: it drops
// datagrams whose source address and DETH source QP are its own, in the
// kernel with a socket filter where it can: selffilter.go).
func (q *QP) LoopbackBlocked() bool { return q.blockSelf }

// SendCQ is the send CQ; its channel has no fd.
func (q *QP) SendCQ() verbs.CQ { return &q.scq }

// RecvCQ is the receive CQ; its channel is an epoll fd over the QP's
// sockets and Poll does the receive work.
func (q *QP) RecvCQ() verbs.CQ { return &q.rcq }

// UnicastIP is the QP's own IPv4 address (its GID is ::ffff:UnicastIP).
func (q *QP) UnicastIP() [4]byte { return q.unicast }

func qpnAddr(qpn uint32) [4]byte {
	return [4]byte{127, byte(qpn >> 16), byte(qpn >> 8), byte(qpn)}
}

type sockopt struct {
	level, name, value int
	what               string
}

// udpSocket makes an unbound UDP socket with opts.
func udpSocket(opts []sockopt) (int, error) {
	// O_NONBLOCK: every read and send is non-blocking anyway, and a
	// blocking UDP socket's poll (the channel's epoll asks it on every
	// wait) walks the receive queue to check the first datagram's length
	// (first_packet_length); a non-blocking one's does not.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.IPPROTO_UDP)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	if err := setSockopts(fd, opts); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// setSockopts sets opts on fd.
func setSockopts(fd int, opts []sockopt) error {
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.name, o.value); err != nil {
			return fmt.Errorf("setsockopt %s: %w", o.what, err)
		}
	}
	return nil
}

var rxOpts = []sockopt{
	{unix.SOL_SOCKET, unix.SO_REUSEADDR, 1, "SO_REUSEADDR"},
	// The destination address (which group; the ICRC covers it) comes
	// from IP_ORIGDSTADDR, a copy of the header's: IP_PKTINFO would also
	// work out a source address for replies with a FIB lookup per
	// datagram, which costs more than all the other control messages.
	{unix.IPPROTO_IP, unix.IP_RECVORIGDSTADDR, 1, "IP_RECVORIGDSTADDR"},
	{unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1, "SO_RXQ_OVFL"},
	{unix.SOL_SOCKET, unix.SO_RCVBUF, sockBufBytes, "SO_RCVBUF"},
}

// grhOpts ask for the TTL and TOS the GRH's IPv4 header shows, unless
// the QP was created with GRHAddressesOnly: about 0.1 µs a datagram.
var grhOpts = []sockopt{
	{unix.IPPROTO_IP, unix.IP_RECVTTL, 1, "IP_RECVTTL"},
	{unix.IPPROTO_IP, unix.IP_RECVTOS, 1, "IP_RECVTOS"},
}

func newQP(id *ID, cfg verbs.QPConfig) (q *QP, err error) {
	r := id.r
	cfg = cfg.WithDefaults()
	sdepth, rdepth := cfg.SendDepth, cfg.RecvDepth
	if sdepth > maxQPWR || rdepth > maxQPWR {
		return nil, fmt.Errorf("soft: ibv_create_qp: depth %d/%d over %d", sdepth, rdepth, maxQPWR)
	}
	if cfg.MaxInline > maxInline {
		return nil, fmt.Errorf("soft: ibv_create_qp: max inline %d over %d: %w", cfg.MaxInline, maxInline, verbs.ErrNotSupported)
	}
	q = &QP{
		id:        id,
		qkey:      cfg.QKey,
		mtu:       r.mtu,
		ifindex:   r.ifi.Index,
		ifaddr:    [4]byte(r.ip.To4()),
		blockSelf: cfg.BlockSelfMulticastLoopback,
		addrOnly:  cfg.GRHAddressesOnly,
		qpn:       id.qpn,
		uniFd:     -1,
		mcFd:      -1,
	}
	q.unicast = q.ifaddr
	q.rcq.wideFd, q.rcq.uniEpFd = -1, -1
	built := q // the error returns below set q to nil
	defer func() {
		if err != nil {
			built.closeFds()
			err = fmt.Errorf("soft: ibv_create_qp: %w", err)
		}
	}()
	q.mrs.Store(new([]*mr))

	tx, mc := qpSockopts(cfg)
	if r.loopbak {
		q.unicast = qpnAddr(q.qpn)
	}
	if err = q.openUnicast(tx); err != nil {
		return nil, fmt.Errorf("unicast socket: %w", err)
	}
	// The multicast socket is bound at the first join to receive: until
	// then (and for good on a send-only QP) it sits in no port table, so
	// the kernel does not look at it for every datagram to port 4791.
	if q.mcFd, err = udpSocket(mc); err != nil {
		return nil, fmt.Errorf("multicast socket: %w", err)
	}
	if q.blockSelf {
		q.selfFilter = attachSelfFilter(q.mcFd, q.unicast, q.qpn)
	}
	if err = q.sq.init(q, sdepth); err != nil {
		return nil, err
	}
	q.scq.init(sdepth)
	if err = q.rcq.init(q, rdepth); err != nil {
		return nil, err
	}
	q.rcq.gro.off = groOff || !cfg.GRO // asked for; on once runs arrive (gro.go)
	return q, nil
}

// qpSockopts are the options of a QP's unicast socket (tx: it sends and
// receives) and multicast socket (mc).
func qpSockopts(cfg verbs.QPConfig) (tx, mc []sockopt) {
	rx := rxOpts[:len(rxOpts):len(rxOpts)]
	if !cfg.GRHAddressesOnly {
		rx = append(rx, grhOpts...)
	}
	uniRx := rx
	if cfg.GRHAddressesOnly {
		// Every read of the unicast socket is bare: its datagrams are
		// for the address it is bound to, and SO_MEMINFO counts drops.
		uniRx = withoutCmsgs(rx)
	}
	// IP_MULTICAST_LOOP and IP_MULTICAST_TTL are left as a new socket
	// has them, 1 and 1 (Linux's defaults, no sysctl changes them).
	tx = append(uniRx[:len(uniRx):len(uniRx)],
		sockopt{unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO, "IP_MTU_DISCOVER"},
		sockopt{unix.SOL_SOCKET, unix.SO_SNDBUF, sockBufBytes, "SO_SNDBUF"},
	)
	mcRx := rx
	if cfg.GRHAddressesOnly {
		// Drops are read with SO_MEMINFO; IP_RECVORIGDSTADDR is
		// switched as reads need it (recvCQ.mcOrigDst).
		mcRx = withoutOpt(rx, unix.SOL_SOCKET, unix.SO_RXQ_OVFL)
	}
	mc = append(mcRx[:len(mcRx):len(mcRx)],
		sockopt{unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0, "IP_MULTICAST_ALL"})
	return tx, mc
}

// openUnicast makes the unicast socket, bound to the QP's address, the
// one every send goes out of.
func (q *QP) openUnicast(opts []sockopt) error {
	// The socket resolve made for Bind, where the ID still has it.
	q.uniFd, q.id.r.sock = q.id.r.sock, -1
	if q.uniFd < 0 {
		var err error
		if q.uniFd, err = udpSocket(nil); err != nil {
			return err
		}
	}
	if err := setSockopts(q.uniFd, opts); err != nil {
		return err
	}
	var err error
	if err = bindRoCE(q.uniFd, q.unicast); err != nil {
		return err
	}
	// IP_TRANSPARENT, where the process may set it (CAP_NET_ADMIN or
	// CAP_NET_RAW in the network namespace: root, or a namespace of its
	// own), spares each send the kernel's check that the source address
	// is local: 127.q.q.q is no interface's address, so the check falls
	// back to a FIB lookup, about 0.13 µs a datagram. The address is
	// local either way, and nothing else changes; without the right the
	// option is left off.
	unix.SetsockoptInt(q.uniFd, unix.IPPROTO_IP, unix.IP_TRANSPARENT, 1)
	mreq := &unix.IPMreqn{Address: q.unicast, Ifindex: int32(q.ifindex)}
	if err = unix.SetsockoptIPMreqn(q.uniFd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, mreq); err != nil {
		return fmt.Errorf("setsockopt IP_MULTICAST_IF: %w", err)
	}
	return nil
}

// closeFds closes every fd the QP holds, those its receive CQ's waiter
// took over through the waiter; leaving the groups is implied by closing
// the multicast socket.
func (q *QP) closeFds() error {
	var first error
	if w := q.rcq.waiter; w != nil {
		first = w.w.Close() // the epoll set and the multicast socket
		q.rcq.wideFd, q.mcFd = -1, -1
	}
	for _, fd := range []*int{&q.uniFd, &q.mcFd, &q.rcq.wideFd, &q.rcq.uniEpFd} {
		if *fd >= 0 {
			if err := unix.Close(*fd); err != nil && first == nil {
				first = err
			}
			*fd = -1
		}
	}
	return first
}

func (q *QP) close() error {
	q.sq.mu.Lock()
	q.scq.mu.Lock()
	q.rcq.mu.Lock()
	defer q.sq.mu.Unlock()
	defer q.scq.mu.Unlock()
	defer q.rcq.mu.Unlock()
	q.sq.closed, q.scq.closed, q.rcq.closed = true, true, true
	q.scq.queued.Store(-1) // Poll takes the lock and reports the close
	// Closing the multicast socket leaves its groups (the kernel's
	// ip_mc_drop_socket, as for any UDP socket): no IP_DROP_MEMBERSHIP
	// each. Nothing else holds the socket: the waiter has it, not a dup.
	q.rcq.groups = nil
	q.rcq.rq = nil
	q.rcq.gro.drop()
	q.rcq.stopWatch()
	if w := q.scq.waiter; w != nil {
		w.w.close() // a WaitPoll still blocked returns net.ErrClosed
	}
	return q.closeFds()
}

// mcGroup is one joined group.
type mcGroup struct {
	addr     [4]byte
	sendOnly bool
}

func (q *QP) join(grp [4]byte, sendOnly bool) (bool, error) {
	c := &q.rcq
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, verbs.ErrClosed
	}
	i := c.findGroup(grp)
	if i >= 0 && (sendOnly || !c.groups[i].sendOnly) {
		return c.groups[i].sendOnly, nil
	}
	if !sendOnly && !c.mcBound {
		if err := bindRoCE(q.mcFd, [4]byte{}); err != nil {
			return false, fmt.Errorf("multicast socket: %w", err)
		}
		c.mcBound = true
	}
	if !sendOnly {
		mreq := &unix.IPMreqn{Multiaddr: grp, Address: q.ifaddr, Ifindex: int32(q.ifindex)}
		if err := unix.SetsockoptIPMreqn(q.mcFd, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, mreq); err != nil {
			err = os.NewSyscallError("setsockopt IP_ADD_MEMBERSHIP", err)
			if errors.Is(err, unix.ENOBUFS) {
				return false, groupLimitError(c.fullMembers(), err)
			}
			return false, err
		}
	}
	if i >= 0 {
		c.groups[i].sendOnly = false
	} else {
		c.groups = append(c.groups, mcGroup{addr: grp, sendOnly: sendOnly})
	}
	if q.selfFilter {
		q.selfGroups.store(c.groups)
	}
	c.membershipChanged()
	return sendOnly, nil
}

// fullMembers counts the groups the QP joined as a full member: the IP
// memberships of its multicast socket; c.mu is held.
func (c *recvCQ) fullMembers() int {
	n := 0
	for _, g := range c.groups {
		if !g.sendOnly {
			n++
		}
	}
	return n
}

// groupLimitError says that a join found the kernel's per-socket limit
// of IP multicast memberships (ENOBUFS from IP_ADD_MEMBERSHIP): a QP's
// full-member groups are its multicast socket's memberships.
func groupLimitError(joined int, err error) error {
	return fmt.Errorf("%w: %w: a software QP joins each group on one socket, and this one has %d groups, "+
		"the limit of net.ipv4.igmp_max_memberships (%d in this network namespace); raise it with "+
		"`sysctl -w net.ipv4.igmp_max_memberships=N` (or /proc/sys/net/ipv4/igmp_max_memberships), "+
		"or spread the groups over more conns (send-only groups do not count)",
		verbs.ErrGroupLimit, err, joined, maxMemberships())
}

func (q *QP) leave(grp [4]byte) error {
	c := &q.rcq
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return verbs.ErrClosed
	}
	i := c.findGroup(grp)
	if i < 0 {
		return fmt.Errorf("not joined: %w", unix.EADDRNOTAVAIL)
	}
	if !c.groups[i].sendOnly {
		if q.selfFilter {
			// Before the membership goes: a datagram sent meanwhile is
			// not counted as filtered (at worst an Overflow too many).
			q.selfGroups.store(append(c.groups[:i:i], c.groups[i+1:]...))
		}
		mreq := &unix.IPMreqn{Multiaddr: grp, Address: q.ifaddr, Ifindex: int32(q.ifindex)}
		if err := unix.SetsockoptIPMreqn(q.mcFd, unix.IPPROTO_IP, unix.IP_DROP_MEMBERSHIP, mreq); err != nil {
			if q.selfFilter {
				q.selfGroups.store(c.groups)
			}
			return os.NewSyscallError("setsockopt IP_DROP_MEMBERSHIP", err)
		}
	}
	c.groups = append(c.groups[:i], c.groups[i+1:]...)
	c.membershipChanged()
	return nil
}

// bindRoCE binds fd to addr:4791. EADDRINUSE there means another socket
// holds the port without SO_REUSEADDR: often the kernel's Soft-RoCE's.
func bindRoCE(fd int, addr [4]byte) error {
	return bindError(addr, unix.Bind(fd, &unix.SockaddrInet4{Port: roce.UDPPort, Addr: addr}))
}

// bindError says what a failed bind to addr:4791 means: for EADDRINUSE,
// who holds the port (portHolder).
func bindError(addr [4]byte, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EADDRINUSE):
		return fmt.Errorf("bind %v:%d: %w (%s)", net.IP(addr[:]), roce.UDPPort, err, portHolder().why())
	}
	return fmt.Errorf("bind %v:%d: %w", net.IP(addr[:]), roce.UDPPort, err)
}

// mcOrigDst turns IP_RECVORIGDSTADDR on the multicast socket of a
// GRHAddressesOnly QP on or off, if it is not already: off while its reads
// are bare, so the kernel prepares no control message for each datagram,
// on when the destination is needed. The kernel makes the message at the
// read, so the change holds for datagrams already queued; c.mu is held.
func (c *recvCQ) mcOrigDst(on bool) {
	if c.origDstOff != on {
		return
	}
	v := 0
	if on {
		v = 1
	}
	if unix.SetsockoptInt(c.q.mcFd, unix.IPPROTO_IP, unix.IP_RECVORIGDSTADDR, v) == nil {
		c.origDstOff = !on
	}
}

// membershipChanged notes a join or leave: bare reads of the multicast
// socket wait until it was read dry, so datagrams queued before the change
// get their destination from IP_ORIGDSTADDR; c.mu is held.
func (c *recvCQ) membershipChanged() {
	c.soleOK, c.mcDry = false, false
	for _, g := range c.groups {
		if g.sendOnly {
			continue
		}
		if c.soleOK {
			c.soleOK = false // two or more
			return
		}
		c.sole, c.soleOK = g.addr, true
	}
}

// withoutCmsgs is opts without the control messages bare reads do not
// use.
func withoutCmsgs(opts []sockopt) []sockopt {
	return withoutOpt(withoutOpt(opts, unix.IPPROTO_IP, unix.IP_RECVORIGDSTADDR), unix.SOL_SOCKET, unix.SO_RXQ_OVFL)
}

// withoutOpt is opts without the option level/name.
func withoutOpt(opts []sockopt, level, name int) []sockopt {
	var out []sockopt
	for _, o := range opts {
		if o.level != level || o.name != name {
			out = append(out, o)
		}
	}
	return out
}

// mr is a memory region: an arena and its LKey.
type mr struct {
	q     *QP
	lkey  uint32
	arena *verbs.Arena
}

func (m *mr) LKey() uint32        { return m.lkey }
func (m *mr) Arena() *verbs.Arena { return m.arena }

// Close deregisters the region: an SGE with its LKey fails from then on.
func (m *mr) Close() error {
	q := m.q
	q.mrMu.Lock()
	defer q.mrMu.Unlock()
	old := *q.mrs.Load()
	mrs := make([]*mr, 0, len(old))
	for _, x := range old {
		if x != m {
			mrs = append(mrs, x)
		}
	}
	q.mrs.Store(&mrs)
	return nil
}

var lkeys atomic.Uint32

// RegisterMemory registers an arena and gives it a unique LKey.
func (q *QP) RegisterMemory(a *verbs.Arena) (verbs.MR, error) {
	if a == nil || a.Len() == 0 {
		return nil, errors.New("soft: ibv_reg_mr: no arena")
	}
	q.mrMu.Lock()
	defer q.mrMu.Unlock()
	m := &mr{q: q, lkey: lkeys.Add(1), arena: a}
	old := *q.mrs.Load()
	mrs := append(old[:len(old):len(old)], m)
	q.mrs.Store(&mrs)
	return m, nil
}

var errBadLKey = errors.New("soft: SGE LKey is not registered on this QP")

// sgeBytes resolves an SGE to its bytes, bounds checked.
func (q *QP) sgeBytes(s verbs.SGE) ([]byte, error) {
	for _, m := range *q.mrs.Load() {
		if m.lkey != s.LKey {
			continue
		}
		b := m.arena.Bytes()
		if uint64(s.Offset)+uint64(s.Length) > uint64(len(b)) {
			return nil, fmt.Errorf("soft: SGE [%d, +%d) outside its MR of %d bytes", s.Offset, s.Length, len(b))
		}
		return b[s.Offset : s.Offset+s.Length : s.Offset+s.Length], nil
	}
	return nil, errBadLKey
}

// ah is an address handle: the resolved IPv4 destination.
type ah struct {
	attr   verbs.AHAttr
	qp     *QP
	dst    [4]byte
	closed atomic.Bool
}

func (a *ah) Attr() verbs.AHAttr { return a.attr }
func (a *ah) Close() error       { a.closed.Store(true); return nil }

// CreateAH checks that the DGID is an IPv4-mapped GID (::ffff:a.b.c.d,
// unicast or multicast) and resolves it to a.b.c.d:4791. For a unicast
// DGID it asks the kernel for the route from the QP's own address, as
// ibv_create_ah does on RoCE (it resolves the route and neighbour): a
// destination that cannot be reached fails here, wrapping the connect(2)
// errno (ENETUNREACH with no route, EHOSTUNREACH, EINVAL for a loopback
// source and a destination off the host).
func (q *QP) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	a := attr.DGID.Addr()
	if attr.DGID.IsZero() || !a.IsValid() {
		return nil, errors.New("soft: ibv_create_ah: zero DGID")
	}
	if !a.Is4() {
		return nil, fmt.Errorf("soft: ibv_create_ah: DGID %v is not IPv4-mapped: %w", attr.DGID, verbs.ErrNotSupported)
	}
	dst := a.As4()
	if !a.IsMulticast() {
		if err := routeFrom(q.unicast, dst); err != nil {
			return nil, fmt.Errorf("soft: ibv_create_ah: route from %v to %v: %w", net.IP(q.unicast[:]), a, err)
		}
	}
	return &ah{attr: attr, qp: q, dst: dst}, nil
}

// routeFrom asks the kernel's FIB for a route from src to dst:4791 by
// connecting a UDP socket bound to src (nothing is sent).
func routeFrom(src, dst [4]byte) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	// IP_FREEBIND: the source is checked by the route lookup, not the bind
	// (127.q.q.q on lo is local anyway; a netdev's address is too).
	unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_FREEBIND, 1)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src}); err != nil {
		return os.NewSyscallError("bind", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: roce.UDPPort, Addr: dst}); err != nil {
		return os.NewSyscallError("connect", err)
	}
	return nil
}

// usable says why a verb cannot run on the QP: the queue it needs is
// closed, or the device was removed. The caller holds that queue's lock.
func (q *QP) usable(verb string, closed bool) error {
	if closed {
		return fmt.Errorf("soft: %s: %w", verb, verbs.ErrClosed)
	}
	if q.id.removed.Load() {
		return fmt.Errorf("soft: %s: %w", verb, verbs.ErrDeviceRemoved)
	}
	return nil
}

// PostRecv posts receive WRs. Each buffer must hold the 40-byte GRH area
// and the payload (and should hold 40 + MTU).
func (q *QP) PostRecv(wrs []verbs.RecvWR) (int, error) {
	c := &q.rcq
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := q.usable("ibv_post_recv", c.closed); err != nil {
		return 0, err
	}
	if c.n == 0 && len(wrs) > 0 {
		// Datagrams may wait with no edge left to wake a reader: kick it
		// (deferred: after the receives are in). Runs sent with UDP GSO
		// may now arrive whole (gro.go).
		defer c.kickWaiter()
		c.groReceivesPosted()
	}
	for i := range wrs {
		if c.n == len(c.rq) {
			return i, fmt.Errorf("soft: ibv_post_recv: %w", verbs.ErrQueueFull)
		}
		b, err := q.sgeBytes(wrs[i].SGE)
		if err != nil {
			return i, fmt.Errorf("soft: ibv_post_recv: %w", err)
		}
		if len(b) < verbs.GRHSize {
			return i, fmt.Errorf("soft: ibv_post_recv: buffer of %d bytes is shorter than the %d-byte GRH", len(b), verbs.GRHSize)
		}
		c.rq[wrap(c.head+c.n, len(c.rq))] = rqEntry{wrid: wrs[i].WRID, buf: b}
		c.n++
	}
	return len(wrs), nil
}

// sendQueue holds the per-slot scratch of a sendmmsg batch: one slot per
// send queue entry. Sends complete synchronously, so the ring is reused by
// every batch.
//
// A run of datagrams to one destination with one length (the last may be
// shorter) goes out as one UDP GSO message (UDP_SEGMENT): the kernel walks
// its stack once for the run and cuts it into datagrams as late as it can
// (on loopback and veth, at the receiving socket). Segment j of a run gets
// IP ID j (the run's skb has ID 0, DF set, unconnected socket, and GSO
// numbers the segments from there), so its ICRC is sealed with that ID.
type sendQueue struct {
	mu     sync.Mutex
	closed bool
	psn    uint32
	hdr    [][roce.MaxHdrSize]byte
	tail   [][8]byte // pad and ICRC
	iov    [][3]unix.Iovec
	names  []unix.RawSockaddrInet4
	msgs   []mmsghdr // one datagram per slot
	status []verbs.WCStatus
	errno  []unix.Errno // why a slot's send failed
	icrc   roce.FlowICRC

	gso     bool       // UDP_SEGMENT works on this socket
	segID   []uint16   // each slot's IP ID (its index in its run)
	dlen    []int      // each slot's UDP payload length
	dst     [][4]byte  // each slot's destination address
	runs    []int      // the first slot of each run of the batch
	slotIdx []int      // 0, 1, ... depth: runs of one slot each
	gmsgs   []mmsghdr  // one message per run
	gctrl   [][24]byte // each run's UDP_SEGMENT cmsg
	flat    []byte     // a lone datagram, gathered for sendto
	// maxScratch is the most slots the scratch above grows to.
	maxScratch int
}

// init makes the send queue with a scratch of firstScratch slots; a post
// of more WRs grows it (grow), up to sendScratch, and a post of more than
// that goes out in batches of sendScratch.
func (s *sendQueue) init(q *QP, depth int) error {
	s.psn = rand.Uint32N(1 << 24)
	s.maxScratch = min(depth, sendScratch)
	s.flat = make([]byte, roce.MaxHdrSize+q.mtu+8)
	s.grow(min(s.maxScratch, firstScratch))
	// A kernel without UDP GSO (before 4.18) refuses the option.
	s.gso = unix.SetsockoptInt(q.uniFd, unix.SOL_UDP, unix.UDP_SEGMENT, 0) == nil
	return nil
}

// grow makes the send scratch n slots; no post is in progress.
func (s *sendQueue) grow(n int) {
	s.hdr = make([][roce.MaxHdrSize]byte, n)
	s.tail = make([][8]byte, n)
	s.iov = make([][3]unix.Iovec, n)
	s.names = make([]unix.RawSockaddrInet4, n)
	s.msgs = make([]mmsghdr, n)
	s.status = make([]verbs.WCStatus, n)
	s.errno = make([]unix.Errno, n)
	s.segID = make([]uint16, n)
	s.dlen = make([]int, n)
	s.dst = make([][4]byte, n)
	s.runs = make([]int, 0, n+1)
	s.slotIdx = make([]int, n+1)
	for i := range s.slotIdx {
		s.slotIdx[i] = i
	}
	s.gmsgs = make([]mmsghdr, n)
	s.gctrl = make([][24]byte, n)
	for i := range s.msgs {
		s.names[i].Family = unix.AF_INET
		s.names[i].Port = htons(roce.UDPPort)
		m := &s.msgs[i].Hdr
		m.Name = (*byte)(unsafe.Pointer(&s.names[i]))
		m.Namelen = unix.SizeofSockaddrInet4
		m.Iov = &s.iov[i][0]
		m.SetIovlen(3)
	}
}

// PollPostSend polls the send CQ and then posts (see verbs.QP): in this
// provider both are plain calls, so it is the two in turn.
func (q *QP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs)
}

// PostSend builds each WR's headers and ICRC into its slot and sends the
// batch with sendmmsg from the QP's unicast socket. Sends complete
// synchronously: a signaled WR's completion is on the send CQ when
// PostSend returns. A WR whose payload exceeds the MTU fails with
// verbs.ErrMessageSize, one that finds the send CQ full with
// verbs.ErrQueueFull; nothing from that WR on is posted.
//
// The kernel's send errors are never lost. A single WR (len(wrs) == 1)
// the kernel refuses (EMSGSIZE, ENETUNREACH, EPERM, ENOBUFS, ...) is not
// posted: PostSend returns 0 and the error, wrapping
// *os.SyscallError{"sendto", errno}. A WR of a batch the kernel refuses
// completes with WCGeneralErr and WC.Errno, signaled or not. A full socket
// buffer (EAGAIN) is waited out.
func (q *QP) PostSend(wrs []verbs.SendWR) (int, error) {
	s := &q.sq
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := q.usable("ibv_post_send", s.closed); err != nil {
		return 0, err
	}
	if q.fault.err.Load() {
		return q.flushSends(wrs) // the error state: reset.go
	}
	posted := 0
	for posted < len(wrs) {
		batch := wrs[posted:]
		k, err := q.prepare(batch)
		if k > 0 {
			if err := q.transmit(batch[:k], len(wrs) == 1); err != nil {
				return posted, fmt.Errorf("soft: ibv_post_send: %w", err)
			}
			posted += k
		}
		if err != nil {
			return posted, fmt.Errorf("soft: ibv_post_send: %w", err)
		}
	}
	return posted, nil
}

// prepare fills slots for up to len(slots) WRs and returns how many; err
// says why the next one could not be. Each WR's headers go into its slot
// (encode), the batch is cut into GSO runs (roce.CutRuns), then each datagram
// is sealed with the ICRC for the IP ID its place in its run gives it
// (seal).
func (q *QP) prepare(wrs []verbs.SendWR) (int, error) {
	s := &q.sq
	if len(wrs) > len(s.msgs) && len(s.msgs) < s.maxScratch {
		s.grow(min(max(len(wrs), 2*len(s.msgs)), s.maxScratch))
	}
	room := -1 // the send CQ's room, asked for at the first signaled WR
	k := min(len(wrs), len(s.msgs))
	var err error
	for i := range k {
		if err = q.encode(i, &wrs[i], &room); err != nil {
			k = i
			break
		}
	}
	s.runs = roce.CutRuns(s.runs[:0], s.segID[:k], s.dst[:k], s.dlen[:k], s.gso)
	for i := range k {
		q.seal(i, k == 1)
	}
	return k, err
}

// encode checks WR i and fills slot i with its headers, destination and
// iovecs (headers, payload, pad and ICRC); room is the send CQ's room for
// signaled WRs, -1 until a signaled WR asks for it (most WRs are not, and
// need not take the CQ's lock).
func (q *QP) encode(i int, wr *verbs.SendWR, room *int) error {
	s := &q.sq
	a, ok := wr.AH.(*ah)
	if !ok || a == nil || a.qp != q {
		return fmt.Errorf("WR %d: AH not created on this QP", i)
	}
	if a.closed.Load() {
		return fmt.Errorf("WR %d: AH closed: %w", i, verbs.ErrClosed)
	}
	payload := wr.Inline
	if payload == nil || wr.Flags&verbs.SendInline == 0 {
		var err error
		if payload, err = q.sgeBytes(wr.SGE); err != nil {
			return fmt.Errorf("WR %d: %w", i, err)
		}
	}
	if len(payload) > q.mtu {
		return fmt.Errorf("WR %d: %d bytes over MTU %d: %w", i, len(payload), q.mtu, verbs.ErrMessageSize)
	}
	if wr.Flags&verbs.SendSignaled != 0 {
		if *room < 0 {
			*room = q.scq.room()
		}
		if *room == 0 {
			return fmt.Errorf("WR %d: send CQ full: %w", i, verbs.ErrQueueFull)
		}
		*room--
	}
	h := roce.Header{
		Opcode:  roce.OpUDSendOnly,
		SE:      wr.Flags&verbs.SendSolicited != 0,
		PadCnt:  uint8(roce.PadFor(len(payload))),
		PKey:    verbs.DefaultPKey,
		DestQPN: wr.RemoteQPN,
		PSN:     s.psn,
		QKey:    wr.RemoteQKey,
		SrcQPN:  q.qpn,
	}
	if h.QKey&0x80000000 != 0 { // the QP's own Q_Key, as verbs does
		h.QKey = q.qkey
	}
	if wr.Flags&verbs.SendWithImm != 0 {
		h.Opcode = roce.OpUDSendOnlyImm
		h.Imm = wr.Imm
	}
	hl := h.Encode(s.hdr[i][:])
	pad := int(h.PadCnt)
	tail := s.tail[i][:pad+roce.ICRCSize]
	clear(tail[:pad])
	s.dlen[i] = hl + len(payload) + pad + roce.ICRCSize
	s.dst[i] = a.dst
	s.names[i].Addr = a.dst
	setIov(&s.iov[i][0], s.hdr[i][:hl])
	setIov(&s.iov[i][1], payload)
	setIov(&s.iov[i][2], tail)
	s.status[i], s.errno[i] = verbs.WCSuccess, 0
	s.psn = (s.psn + 1) & 0xFFFFFF
	return nil
}

// seal writes slot i's ICRC, for the IP ID segID[i]. A lone datagram's
// payload is copied into flat with the pass that seals it (sendFlat sends
// it from there).
func (q *QP) seal(i int, lone bool) {
	s := &q.sq
	hl := int(s.iov[i][0].Len)
	payload := iovBytes(s.iov[i][1])
	tail := iovBytes(s.iov[i][2])
	pad := len(tail) - roce.ICRCSize
	crc := s.icrc.Start(q.unicast, s.dst[i], s.segID[i], true, roce.UDPPort, roce.UDPPort, roce.UDPHdrSize+s.dlen[i], s.hdr[i][:])
	if hl > roce.HdrSize {
		crc = crc32.Update(crc, crc32.IEEETable, s.hdr[i][roce.HdrSize:hl])
	}
	if lone {
		dst := s.flat[roce.MaxHdrSize : roce.MaxHdrSize+len(payload)]
		crc = roce.CRCCopy(crc, dst, payload)
		setIov(&s.iov[i][1], dst)
	} else {
		crc = roce.CRCUpdate(crc, payload)
	}
	crc = crc32.Update(crc, crc32.IEEETable, tail[:pad])
	binary.LittleEndian.PutUint32(tail[pad:], crc)
}

// iovBytes is the memory an iovec points at.
func iovBytes(v unix.Iovec) []byte { return unsafe.Slice(v.Base, v.Len) }

// transmit sends the prepared slots, a message per run, and completes the
// WRs. For a lone WR (alone) that the kernel refused it queues no
// completion and returns the error instead.
func (q *QP) transmit(wrs []verbs.SendWR, alone bool) error {
	s := &q.sq
	nr := len(s.runs)
	s.runs = append(s.runs, len(wrs))
	for r := range nr {
		first, n := s.runs[r], s.runs[r+1]-s.runs[r]
		g := &s.gmsgs[r]
		g.Hdr = s.msgs[first].Hdr
		g.Hdr.SetIovlen(3 * n)
		g.Len = 0
		if n > 1 {
			c := s.gctrl[r][:]
			h := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
			h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
			h.SetLen(unix.CmsgLen(2))
			*(*uint16)(unsafe.Pointer(&c[unix.CmsgLen(0)])) = uint16(s.dlen[first])
			g.Hdr.Control = &c[0]
			g.Hdr.SetControllen(unix.CmsgSpace(2))
		}
	}
	q.send(s.gmsgs[:nr], s.runs)
	if q.selfFilter {
		q.noteSelfLooped(len(wrs))
	}
	for i := range wrs {
		s.iov[i][1] = unix.Iovec{} // keep no caller's inline buffer alive
	}
	if alone && s.status[0] != verbs.WCSuccess {
		return os.NewSyscallError("sendto", s.errno[0])
	}
	locked := false // the send CQ's lock, taken for the first completion
	for i := range wrs {
		if wrs[i].Flags&verbs.SendSignaled != 0 || s.status[i] != verbs.WCSuccess {
			if !locked {
				q.scq.mu.Lock()
				locked = true
			}
			q.scq.push(verbs.WC{WRID: wrs[i].WRID, Status: s.status[i], Opcode: verbs.WCSend, QPN: q.qpn, Errno: uint32(s.errno[i])})
		}
	}
	if locked {
		q.scq.mu.Unlock()
	}
	return nil
}

// sendRuns is sendmmsg; tests replace it to make the kernel refuse GSO.
var sendRuns = sendmmsg

// send sends msgs, msgs[r] carrying slots [runs[r], runs[r+1]), and
// records what became of each slot: a run the route cannot take as GSO (a
// device without checksum offload, an MTU or size limit the run does not
// fit) is sent again one datagram at a time and the QP stops making runs;
// any other error (ENOBUFS included: the kernel dropped it) fails the
// run's WRs with that errno. A full socket buffer is waited out by
// sendmmsg and sendto.
func (q *QP) send(msgs []mmsghdr, runs []int) {
	s := &q.sq
	for r := 0; r < len(msgs); {
		var sent int
		var err error
		if r == len(msgs)-1 && runs[r+1]-runs[r] == 1 {
			sent, err = q.sendFlat(&msgs[r])
		} else {
			sent, err = sendRuns(q.uniFd, msgs[r:], 0)
		}
		if err == nil {
			r += sent
			continue
		}
		first, last := runs[r], runs[r+1]
		switch {
		case err == unix.EINTR:
			continue
		case last-first > 1 && (err == unix.EIO || err == unix.EINVAL || err == unix.EOPNOTSUPP || err == unix.EMSGSIZE):
			s.gso = false
			q.resealAlone(first, last)
			q.send(s.msgs[first:last], s.slotIdx[first:last+1])
		default:
			errno, _ := err.(unix.Errno)
			if errno == 0 {
				errno = unix.EIO
			}
			for i := first; i < last; i++ {
				s.status[i], s.errno[i] = verbs.WCGeneralErr, errno
			}
		}
		r++
	}
}

// sendFlat sends the one datagram m carries with sendto from a contiguous
// copy: for a lone datagram, gathering it here costs less than the
// kernel's reading a msghdr and importing its iovecs (a 4 KiB copy
// included). It returns 1 or an error, as sendmmsg would.
//
// The headers go just before flat[maxHdrSize:], where the payload starts;
// a payload prepare already copied there stays.
func (q *QP) sendFlat(m *mmsghdr) (int, error) {
	flat := q.sq.flat
	iov := unsafe.Slice(m.Hdr.Iov, m.Hdr.Iovlen)
	start := roce.MaxHdrSize - int(iov[0].Len)
	n := start
	for _, v := range iov {
		if v.Len > 0 && v.Base != &flat[n] {
			copy(flat[n:], unsafe.Slice(v.Base, v.Len))
		}
		n += int(v.Len)
	}
	return 1, sendto(q.uniFd, flat[start:n], m.Hdr.Name)
}

// resealAlone reseals the ICRC of the slots in [first, last) sealed as
// later segments of a run, for the IP ID 0 they get sent alone.
func (q *QP) resealAlone(first, last int) {
	s := &q.sq
	for i := first; i < last; i++ {
		if id := s.segID[i]; id != 0 {
			tail := s.iov[i][2]
			icrc := unsafe.Slice(tail.Base, tail.Len)[tail.Len-roce.ICRCSize:]
			fix := roce.IDDelta(roce.UDPHdrSize+s.dlen[i], id)
			binary.LittleEndian.PutUint32(icrc, binary.LittleEndian.Uint32(icrc)^fix)
			s.segID[i] = 0
		}
	}
}

// bufferFds are the sockets whose SO_RCVBUF (recv) or SO_SNDBUF a
// socket buffer call sets: both receive; the unicast socket sends.
func (q *QP) bufferFds(recv bool) (opt int, fds [2]int) {
	if recv {
		return unix.SO_RCVBUF, [2]int{q.mcFd, q.uniFd}
	}
	return unix.SO_SNDBUF, [2]int{q.uniFd, -1}
}

// SetSocketBuffer sets SO_RCVBUF of both sockets (recv) or SO_SNDBUF of
// the unicast one to bytes, as net.UDPConn's SetReadBuffer and
// SetWriteBuffer do. The sockets stay the QP's for its life (Reset keeps
// them), so the size holds until it is set again.
func (q *QP) SetSocketBuffer(recv bool, bytes int) (int, error) {
	opt, fds := q.bufferFds(recv)
	for _, fd := range fds {
		if fd < 0 {
			continue
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, bytes); err != nil {
			return q.SocketBuffer(recv), os.NewSyscallError("setsockopt", err)
		}
	}
	return q.SocketBuffer(recv), nil
}

// SocketBuffer returns half the smallest SO_RCVBUF (recv) or SO_SNDBUF
// getsockopt reports for the sockets SetSocketBuffer sets.
func (q *QP) SocketBuffer(recv bool) int {
	opt, fds := q.bufferFds(recv)
	least := 0
	for _, fd := range fds {
		if fd < 0 {
			continue
		}
		if n, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt); err == nil && (least == 0 || n < least) {
			least = n
		}
	}
	return least / 2
}
