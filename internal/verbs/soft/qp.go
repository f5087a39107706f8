//go:build linux

package soft

import (
	"cmp"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// QP limits (the defaults are the model's: verbs.QPConfig.WithDefaults).
const (
	maxInline    = 4096
	recvBatch    = 64                     // datagrams per recvmmsg
	sendScratch  = 64                     // datagrams prepared at once (a GSO run's most: roce.MaxGSOSegs)
	sockBufBytes = verbs.SoftSocketBuffer // SO_RCVBUF/SO_SNDBUF asked for (capped by rmem_max)
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
		uniFd:     noFd,
		mcFd:      noFd,
	}
	q.unicast = q.ifaddr
	q.rcq.wideFd, q.rcq.uniEpFd = noFd, noFd
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

// closeFds closes every fd the QP holds, those its receive CQ's waiter
// took over through the waiter; leaving the groups is implied by closing
// the multicast socket.
func (q *QP) closeFds() error {
	var first error
	if w := q.rcq.waiter; w != nil {
		first = w.w.Close() // the epoll set and the multicast socket
		q.rcq.wideFd, q.mcFd = noFd, noFd
	}
	for _, fd := range []*int{&q.uniFd, &q.mcFd, &q.rcq.wideFd, &q.rcq.uniEpFd} {
		if *fd >= 0 {
			first = cmp.Or(first, unix.Close(*fd)) // the first error
			*fd = noFd
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
