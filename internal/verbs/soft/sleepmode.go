//go:build linux

package soft

import "sync/atomic"

// sleepMode is where the receive CQ's waiter sleeps, a two-state machine:
//
//	         unicast datagram (heard)
//	narrow ---------------------------> wide, wideWaits sleeps left
//	  ^                                   |  each sleep (next) uses one;
//	  |        no sleeps left (next)      |  a unicast datagram refills
//	  +-----------------------------------+
//
// narrow: the waiter sleeps on the multicast socket alone, and a unicast
// datagram comes through the kick of the watch on the unicast socket
// (about 3 µs a hand-off); wide: it sleeps on the epoll set of both
// sockets, which a unicast datagram wakes directly. The state says what
// the epoll sets are arranged for (recvCQ.setMode arranges them, and only
// when the state changes); sleepsLeft is the countdown in wide.
type sleepMode struct {
	state      atomic.Uint32 // modeNarrow or modeWide
	sleepsLeft atomic.Int32  // wide: sleeps before going back to narrow
}

const (
	modeWide   uint32 = iota // the zero state: a fresh CQ sleeps wide
	modeNarrow               // asked for once a waiter says Narrow
)

// wideWaits is how many sleeps after a unicast datagram are wide; sleeping
// narrow, each unicast datagram would cost a kick (a goroutine hand-off
// and two deadline changes, about 3 µs on the test machine).
const wideWaits = 64

// narrow says whether the epoll sets are arranged for sleeping narrow.
func (m *sleepMode) narrow() bool { return m.state.Load() == modeNarrow }

// heard notes a unicast datagram: the next wideWaits sleeps are wide.
func (m *sleepMode) heard() { m.sleepsLeft.Store(wideWaits) }

// next takes one sleep's transition and returns the state the sleep
// wants; the caller arranges the sets when it differs from the current
// one, then records it with set. Only the waiter calls it, before each
// sleep.
func (m *sleepMode) next() uint32 {
	if m.sleepsLeft.Load() > 0 {
		m.sleepsLeft.Add(-1)
		return modeWide
	}
	return modeNarrow
}

// set records the state the sets are now arranged for.
func (m *sleepMode) set(state uint32) { m.state.Store(state) }
