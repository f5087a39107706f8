package soft

import (
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// RefuseGSO makes every send of a run of two or more datagrams fail with
// errno, as a kernel or route that cannot do UDP GSO would, until restore
// is called; refused counts the refusals.
func RefuseGSO(errno unix.Errno) (refused *atomic.Int32, restore func()) {
	refused = new(atomic.Int32)
	sendRuns = func(fd int, msgs []mmsghdr, flags int) (int, error) {
		if msgs[0].Hdr.Iovlen > 3 {
			refused.Add(1)
			return 0, errno
		}
		return sendmmsg(fd, msgs, flags)
	}
	return refused, func() { sendRuns = sendmmsg }
}

// BareReads is how many bare reads (no control messages) q's receive CQ
// made.
func BareReads(q *QP) uint64 {
	q.rcq.mu.Lock()
	defer q.rcq.mu.Unlock()
	return q.rcq.nBare
}

// BindError is what a bind to addr:4791 that failed with err returns.
func BindError(addr [4]byte, err error) error { return bindError(addr, err) }

// Transparent reports whether q's unicast socket has IP_TRANSPARENT.
func Transparent(q *QP) bool {
	v, err := unix.GetsockoptInt(q.uniFd, unix.IPPROTO_IP, unix.IP_TRANSPARENT)
	return err == nil && v == 1
}

// FakePortHolder makes bind errors name the given holder of port 4791
// (pid 0 and rxe false: none found) until restore is called.
func FakePortHolder(pid int, comm string, rxe bool) (restore func()) {
	portHolder = func() holder { return holder{pid: pid, comm: comm, rxe: rxe} }
	return func() { portHolder = findPortHolder }
}

// RecvWaiterHooks are what the receive CQ's waiter uses to sleep narrow
// (wait.go): the narrow fd, whether to sleep on it, and the kick.
type RecvWaiterHooks interface {
	NarrowFd() int
	Narrow() bool
	SetKick(kick func()) error
}

// RecvWaiterHooksOf returns q's receive CQ's waiter hooks.
func RecvWaiterHooksOf(q *QP) RecvWaiterHooks { return recvHooks{&q.rcq} }

type recvHooks struct{ c *recvCQ }

func (h recvHooks) NarrowFd() int             { return h.c.q.mcFd }
func (h recvHooks) Narrow() bool              { return h.c.sleepNarrow() }
func (h recvHooks) SetKick(kick func()) error { return h.c.setKick(kick) }

// PollRecvWoken polls q's receive CQ as its waiter does after its fd
// woke the wait.
func PollRecvWoken(q *QP, wcs []verbs.WC) (int, error) { return q.rcq.poll(wcs, true) }

// SelfFiltered reports whether q's multicast socket has the self filter.
func SelfFiltered(q *QP) bool { return q.selfFilter }

// NoSelfFilter makes new QPs go without the self filter, as where the
// kernel refuses it, until restore is called.
func NoSelfFilter() (restore func()) {
	old := attachSelfFilter
	attachSelfFilter = func(int, [4]byte, uint32) bool { return false }
	return func() { attachSelfFilter = old }
}
