//go:build linux

// Hooks into the package's internals for its tests (package
// rdmanet_test): the state a test reads, the constants it bounds, the
// timers it observes. The test backends are in export_backends_test.go.

package rdmanet

import (
	"sync"
	"time"
	"unsafe"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// SetSendBufferInline says whether SendBuffer datagrams within the inline
// limit are posted inline (the default) or by their SGE.
func SetSendBufferInline(c *Conn, on bool) {
	c.wr.mu.Lock()
	c.wr.bufNoInline = !on
	c.wr.mu.Unlock()
}

// InjectEvent raises an asynchronous event on a software-backend conn's ID.
func InjectEvent(c *Conn, ev verbs.Event) error { return soft.InjectEvent(c.id, ev) }

// DropCountKeys returns the keys of the drop counters of c's QP (all of
// them, zero or not), and whether it counts drops at all.
func DropCountKeys(c *Conn) ([]string, bool) {
	var keys []string
	for k := range c.qp.DropCounts() {
		keys = append(keys, k)
	}
	return keys, keys != nil
}

// AHCacheLen returns how many unicast address handles c keeps.
func AHCacheLen(c *Conn) int {
	c.wr.mu.Lock()
	defer c.wr.mu.Unlock()
	return len(c.wr.ahs)
}

// FreedSpans returns how many freed SendBuffers c still recognizes
// (writes of their memory fail with ErrSendBufferFreed).
func FreedSpans(c *Conn) int {
	c.wr.mu.Lock()
	defer c.wr.mu.Unlock()
	return len(c.wr.freedSpans)
}

// MaxFreedSpans is how many freed SendBuffers a conn recognizes at most.
const MaxFreedSpans = maxFreedSpans

// Depths returns the receive and send ring depths c listened with.
func Depths(c *Conn) (recv, send int) { return c.cfg.RecvDepth, c.cfg.SendDepth }

// BindTarget says what a BindConfig asks for, as the auto backend's
// fallback reason names it.
func BindTarget(bc verbs.BindConfig) string { return bindTarget(bc) }

// SpansLeftAfter returns the [base, base+size) spans of bases and sizes
// that deleteOverlaps keeps when a buffer at [nb, nb+ns) is mapped.
func SpansLeftAfter(bases, sizes []uintptr, nb, ns uintptr) [][2]uintptr {
	var spans []span
	for i := range bases {
		spans = append(spans, span{bases[i], sizes[i]})
	}
	var out [][2]uintptr
	for _, sp := range deleteOverlaps(spans, span{nb, ns}) {
		out = append(out, [2]uintptr{sp.base, sp.size})
	}
	return out
}

// WriteFromAfterFreed is what a write of b finds when the SendBuffer
// freed last spanned the freedSize bytes at mem's start: bufferOf's
// error (ErrSendBufferFreed, or nil for memory of no SendBuffer).
func WriteFromAfterFreed(mem []byte, freedSize uintptr, b []byte) error {
	s := sendState{freedSpans: []span{{uintptr(unsafe.Pointer(unsafe.SliceData(mem))), freedSize}}}
	_, _, err := s.bufferOf(b)
	return err
}

// Unread is what rdmanet/reliable asks of c: whether received datagrams
// wait to be read, and whether that is known.
func Unread(c *Conn) (pending, known bool) { return c.unread() }

// RecoverRetry is how long a failed QP reset waits before the next try.
const RecoverRetry = recoverRetry

// waitLog records the waits asked of a time.After stand-in.
type waitLog struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (l *waitLog) add(d time.Duration) {
	l.mu.Lock()
	l.waits = append(l.waits, d)
	l.mu.Unlock()
}

func (l *waitLog) get() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.waits...)
}

// ObserveRejoinWaits makes every conn's rejoin back-off end at once and
// records it; waits returns them so far, and restore puts time.After
// back. Not for parallel tests.
func ObserveRejoinWaits() (waits func() []time.Duration, restore func()) {
	var l waitLog
	rejoinAfter = func(d time.Duration) <-chan time.Time {
		l.add(d)
		return time.After(0)
	}
	return l.get, func() { rejoinAfter = time.After }
}

// ObserveRecoverWaits records every conn's recoverLoop wait, cut to
// RecoverRetry at most; waits returns them so far, and restore puts
// time.After back. Not for parallel tests.
func ObserveRecoverWaits() (waits func() []time.Duration, restore func()) {
	var l waitLog
	recoverAfter = func(d time.Duration) <-chan time.Time {
		l.add(d)
		return time.After(min(d, recoverRetry))
	}
	return l.get, func() { recoverAfter = time.After }
}

// PinRecoverClock stops the clock of every conn's reset schedule, and
// makes each recoverLoop wait move it on by exactly the wait and end at
// once; waits returns the waits so far, and restore puts time.Now and
// time.After back. Not for parallel tests.
func PinRecoverClock() (waits func() []time.Duration, restore func()) {
	var l waitLog
	var mu sync.Mutex
	now := time.Now().Round(0)
	recoverNow = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	recoverAfter = func(d time.Duration) <-chan time.Time {
		l.add(d)
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
		return time.After(0)
	}
	return l.get, func() { recoverNow, recoverAfter = time.Now, time.After }
}
