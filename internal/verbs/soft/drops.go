//go:build linux

package soft

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Drops are a QP's counters of datagrams dropped, by reason.
type Drops struct {
	Truncated uint64 // shorter than BTH+DETH+ICRC
	BadTVer   uint64
	BadOpcode uint64 // not UD SEND_ONLY[/WITH_IMMEDIATE]
	BadPKey   uint64
	BadQKey   uint64
	BadICRC   uint64
	BadPad    uint64
	NotForUs  uint64 // dest QPN not ours, or a group not joined
	TooLong   uint64 // larger than the posted receive buffer
	Self      uint64 // own multicast looped back (BlockSelfMulticastLoopback)
	// Overflow counts datagrams the kernel dropped because the socket
	// buffer was full: they found no posted receive for too long. It is
	// the sockets' sk_drops, from SO_RXQ_OVFL on received datagrams and
	// from SO_MEMINFO when Drops or DropCounts is called, less the QP's
	// own multicast that its self filter dropped (selffilter.go), which
	// the kernel counts there too.
	Overflow uint64
}

// Drops returns the QP's drop counters.
func (q *QP) Drops() Drops {
	q.refreshSockDrops()
	return Drops{
		Truncated: q.drops[roce.DropTruncated].Load(),
		BadTVer:   q.drops[roce.DropBadTVer].Load(),
		BadOpcode: q.drops[roce.DropBadOpcode].Load(),
		BadPKey:   q.drops[roce.DropBadPKey].Load(),
		BadQKey:   q.drops[roce.DropBadQKey].Load(),
		BadICRC:   q.drops[roce.DropBadICRC].Load(),
		BadPad:    q.drops[roce.DropBadPad].Load(),
		NotForUs:  q.drops[roce.DropNotForUs].Load(),
		TooLong:   q.drops[roce.DropTooLong].Load(),
		Self:      q.drops[roce.DropSelf].Load(),
		Overflow:  q.overflowCount(),
	}
}

// DropCounts returns the counters by reason name (verbs.QP).
func (q *QP) DropCounts() map[string]uint64 {
	q.refreshSockDrops()
	m := make(map[string]uint64, roce.NumDropReasons)
	for r := roce.DropTruncated; r < roce.NumDropReasons; r++ {
		m[dropNames[r]] = q.drops[r].Load()
	}
	m[verbs.DropOverflow] = q.overflowCount()
	return m
}

// dropNames are the keys DropCounts reports each reason under.
var dropNames = [roce.NumDropReasons]string{
	roce.DropTruncated: verbs.DropTruncated,
	roce.DropBadTVer:   verbs.DropBadTVer,
	roce.DropBadOpcode: verbs.DropBadOpcode,
	roce.DropBadPKey:   verbs.DropBadPKey,
	roce.DropBadQKey:   verbs.DropBadQKey,
	roce.DropBadICRC:   verbs.DropBadICRC,
	roce.DropBadPad:    verbs.DropBadPad,
	roce.DropNotForUs:  verbs.DropNotForUs,
	roce.DropTooLong:   verbs.DropTooLong,
	roce.DropSelf:      verbs.DropOwnLoopback,
}

// DropsOf returns the drop counters of a software QP; ok is false for a
// QP of another provider.
func DropsOf(qp verbs.QP) (d Drops, ok bool) {
	sq, ok := qp.(*QP)
	if !ok {
		return Drops{}, false
	}
	return sq.Drops(), true
}

func (q *QP) overflowCount() uint64 {
	return uint64(q.mcOverflow()) + uint64(q.sockDrops[1].Load())
}

// noteSockDrops records a socket's cumulative sk_drops.
func (q *QP) noteSockDrops(sock int, v uint32) {
	for {
		old := q.sockDrops[sock].Load()
		if int32(v-old) <= 0 || q.sockDrops[sock].CompareAndSwap(old, v) {
			return
		}
	}
}

// skMeminfoDrops is SK_MEMINFO_DROPS, the index of sk_drops in SO_MEMINFO.
const skMeminfoDrops = 8

// refreshSockDrops reads sk_drops of both sockets with SO_MEMINFO.
func (q *QP) refreshSockDrops() {
	c := &q.rcq
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	for i, fd := range [2]int{q.mcFd, q.uniFd} {
		var mi [16]uint32
		l := uint32(unsafe.Sizeof(mi))
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
			uintptr(unsafe.Pointer(&mi[0])), uintptr(unsafe.Pointer(&l)), 0)
		if e == 0 && l/4 > skMeminfoDrops {
			q.noteSockDrops(i, mi[skMeminfoDrops])
		}
	}
}
