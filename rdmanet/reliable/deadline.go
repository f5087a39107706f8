package reliable

import (
	"sync"
	"time"
)

// writeDeadline scopes the user's write deadline to the user's writes.
//
// The underlying conn has one write deadline, and once it has passed
// every send on it fails at once. The conn's own sends (heartbeats,
// repairs and "lost" answers from the sender; NAKs and status from the
// receiver) must go out whatever deadline the user's writes have: a
// sender whose last write's deadline had passed sent no heartbeat or
// repair again, and its receivers never got the tail of its stream
// (TestWriteDeadlineSparesProtocol). So the underlying conn carries the
// deadline only while a write holds the sender's lock (s.mu), which the
// sender's own sends also take, and not while the write waits for the
// slowest receiver with s.mu released (waitWindow); SetWriteDeadline
// passes a new deadline to a write in progress. A receiver's NAK or
// status sent while a write's deadline has just passed under it fails as
// a lost datagram would (asked again, reported again).
type writeDeadline struct {
	mu    sync.Mutex
	on    bool  // a write holds s.mu
	under int64 // the deadline set on the underlying conn (unix nanos, 0: none)
}

// deadlineOn gives the underlying conn the user's deadline for a write;
// s.mu is held.
func (s *sender) deadlineOn() {
	d := &s.dl
	d.mu.Lock()
	d.on = true
	s.setUnder(s.c.writeDL.Load())
	d.mu.Unlock()
}

// deadlineOff takes it back before s.mu is released.
func (s *sender) deadlineOff() {
	d := &s.dl
	d.mu.Lock()
	d.on = false
	s.setUnder(0)
	d.mu.Unlock()
}

// setDeadline passes a deadline set by SetWriteDeadline to the write in
// progress, if any.
func (s *sender) setDeadline(dl int64) {
	d := &s.dl
	d.mu.Lock()
	if d.on {
		s.setUnder(dl)
	}
	d.mu.Unlock()
}

// setUnder sets the underlying conn's write deadline to dl unless it is
// that already; s.dl.mu is held.
func (s *sender) setUnder(dl int64) {
	d := &s.dl
	if d.under == dl {
		return
	}
	d.under = dl
	s.c.conn.SetWriteDeadline(deadlineTime(dl))
}

// deadlineTime converts a deadline kept as unix nanoseconds (0: none)
// into the time.Time that SetReadDeadline and SetWriteDeadline take.
func deadlineTime(dl int64) time.Time {
	if dl == 0 {
		return time.Time{}
	}
	return time.Unix(0, dl)
}
