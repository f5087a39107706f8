package reliable

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// Who reads the underlying conn.
//
// The receive loop reads it while nobody reads the reliable conn: NAKs,
// status and data are handled as they come, and ready messages wait for
// a reader. A reader that finds nothing ready takes the underlying conn
// over and reads it itself, doing the protocol work inline, so that a
// datagram wakes the goroutine that delivers it and nothing else (one
// wake-up per message, as with a plain conn, instead of the receive
// loop's and then the reader's). The reader keeps the conn between reads;
// one that stays away longer than rxAway is relieved by the timer loop at
// its next tick, and the receive loop reads again. Close gives the conn
// back to the receive loop too, so that lingering hears its receivers.
//
//	rxLoop    the receive loop reads
//	rxReader  the reader side reads, from inside ReadFrom or ReadBatch;
//	          the receive loop waits on x.turn
//
// Hand-overs: a reader that finds rxLoop sets want and waits on notify;
// the receive loop, after its next batch, hands over (rxReader) if the
// reader is still in, wakes it, and waits on x.turn. The timer loop (or
// Close) takes the conn back (rxGiveBack: rxLoop) and sends on x.turn.
type rxOwner uint8

const (
	rxLoop rxOwner = iota
	rxReader
)

// rxAway: how long a reader may stay out of ReadFrom and keep reading the
// underlying conn. Protocol work waits while it is away: at most this
// plus the timer loop's period (StatusInterval) before the receive loop
// resumes.
const rxAway = int64(200 * time.Microsecond)

type rxState struct {
	mu      sync.Mutex
	owner   rxOwner
	in      bool  // a reader is in ReadFrom or ReadBatch
	want    bool  // it found rxLoop and waits for the hand-over
	blocked bool  // it is in the underlying ReadBatch
	away    int64 // when the reader last left, while rxReader
	dl      int64 // the read deadline set on the underlying conn
	turn    chan struct{}

	// io is held by whoever is in the underlying ReadBatch, and guards
	// ms and h: one batch of buffers for the receive loop and the reader
	// in turn.
	io sync.Mutex
	ms []rdmanet.Message
	h  header

	// handling: datagrams read from the underlying conn are being
	// handled (readConn, readDatagram): input not handled yet, for
	// inputWaits.
	handling atomic.Bool
}

func (x *rxState) init(c *Conn) {
	x.turn = make(chan struct{}, 1)
	x.ms = make([]rdmanet.Message, recvBatch)
	// One byte past the last slot: readDatagram reads into the first
	// slot and one byte more, to see a datagram longer than the MTU.
	buf := make([]byte, recvBatch*c.mtu+1)
	for i := range x.ms {
		x.ms[i].Buffer = buf[i*c.mtu : (i+1)*c.mtu]
	}
}

// setDeadlineLocked sets the underlying conn's read deadline to dl (unix
// nanos, 0: none) unless it is that already; x.mu is held.
func (c *Conn) setDeadlineLocked(dl int64) {
	x := &c.rx
	if x.dl == dl {
		return
	}
	x.dl = dl
	c.conn.SetReadDeadline(deadlineTime(dl))
}

// rxEnter and rxLeave bracket a ReadFrom or ReadBatch.
func (c *Conn) rxEnter() {
	x := &c.rx
	x.mu.Lock()
	x.in = true
	x.mu.Unlock()
}

func (c *Conn) rxLeave() {
	now := c.readNow // the clock of this call's last inline read, if any
	if now == 0 {
		now = c.now()
	}
	x := &c.rx
	x.mu.Lock()
	x.in, x.want = false, false
	x.away = now
	x.mu.Unlock()
}

// rxSetDeadline passes a new read deadline to the underlying conn when
// the reader is blocked in it; otherwise the reader sets it before its
// next read.
func (c *Conn) rxSetDeadline(dl int64) {
	x := &c.rx
	x.mu.Lock()
	if x.owner == rxReader && x.blocked {
		c.setDeadlineLocked(dl)
	}
	x.mu.Unlock()
}

// rxTake reports whether the reader holds the underlying conn; if not, it
// asks the receive loop for it.
func (c *Conn) rxTake() bool {
	x := &c.rx
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.owner == rxReader {
		return true
	}
	x.want = true
	return false
}

// rxGiveBack returns the underlying conn to the receive loop if the
// reader holds it and, unless force, has been away for rxAway. It reports
// when to look again (0: no need).
func (c *Conn) rxGiveBack(now int64, force bool) int64 {
	x := &c.rx
	x.mu.Lock()
	if x.owner != rxReader {
		x.mu.Unlock()
		return 0
	}
	if !force && x.in {
		// In ReadFrom, the reader reads: its leaving arms nothing, so
		// the timer loop looks again a StatusInterval on.
		x.mu.Unlock()
		return now + int64(c.cfg.StatusInterval)
	}
	if !force && now-x.away < rxAway {
		at := x.away + rxAway // read under x.mu: rxLeave writes it
		x.mu.Unlock()
		return at
	}
	x.owner = rxLoop
	c.setDeadlineLocked(0)
	x.mu.Unlock()
	select {
	case x.turn <- struct{}{}:
	default:
	}
	return 0
}

// readInline reads the underlying conn from the reader, which holds it,
// waiting until the read deadline, and handles what it read at once: one
// datagram for ReadFrom, or with batch (ReadBatch) all that are there, up
// to recvBatch. ReadFrom's buffer b takes the datagram's message at once
// where it can (receiver.direct; c.rcv.directOK then says so).
func (c *Conn) readInline(batch bool, b []byte) error {
	x := &c.rx
	x.io.Lock()
	x.mu.Lock()
	if x.owner != rxReader { // taken back meanwhile (Close)
		x.mu.Unlock()
		x.io.Unlock()
		return nil
	}
	c.setDeadlineLocked(c.readDL.Load())
	x.blocked = true
	x.mu.Unlock()
	var err error
	if batch {
		err = c.readConn()
	} else {
		c.rcv.direct = b
		c.readNow, err = c.readDatagram()
		c.rcv.direct = nil
	}
	x.mu.Lock()
	x.blocked = false
	x.mu.Unlock()
	x.io.Unlock()
	// What became ready is the caller's to take: nobody to wake.
	c.rcv.signal.Store(false)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, net.ErrClosed) || c.closing.Load():
		return c.opError("read", nil, net.ErrClosed)
	}
	return nil // a deadline, or a transient error: the caller looks again
}

// readConn reads one batch from the underlying conn and handles it; x.io
// is held.
func (c *Conn) readConn() error {
	x := &c.rx
	n, err := c.conn.ReadBatch(x.ms)
	if n == 0 {
		return err
	}
	x.handling.Store(true)
	now := c.now()
	for i := range x.ms[:n] {
		if x.ms[i].Truncated { // longer than the MTU: no sender of ours
			c.stats.malformed.Add(1)
			continue
		}
		c.handle(x.ms[i].Buffer[:x.ms[i].N], x.ms[i].Addr, &x.h, now)
	}
	x.handling.Store(false)
	if n < len(x.ms) {
		c.rcv.drained() // read dry: NAKs held for unread input may go
	}
	return err
}

// readDatagram reads one datagram from the underlying conn and handles
// it; x.io is held. ReadFrom's reader reads one at a time: ReadFromAddr
// hands out a burst already polled without another poll, and when it has
// handed out the last it returns without looking again (ReadBatch polls
// once more to see that the batch has ended: a system call per wake-up).
// It returns the clock it handled the datagram at (0: none).
func (c *Conn) readDatagram() (int64, error) {
	x := &c.rx
	// ReadFromAddr cuts a datagram to the buffer and does not say so: a
	// byte more than the MTU shows one longer (the slots are contiguous;
	// the batch that used the next slot is handled).
	n, from, err := c.conn.ReadFromAddr(x.ms[0].Buffer[:c.mtu+1])
	if err != nil {
		return 0, err
	}
	now := c.now()
	if n > c.mtu { // longer than the MTU: no sender of ours, as in readConn
		c.stats.malformed.Add(1)
		return now, nil
	}
	x.handling.Store(true)
	c.handle(x.ms[0].Buffer[:n], from, &x.h, now)
	x.handling.Store(false)
	return now, nil
}

// receiveLoop reads the underlying conn while it holds it (rxLoop) and
// runs the protocol: data into the receive windows, NAKs and status into
// the sender.
func (c *Conn) receiveLoop() {
	defer c.wg.Done()
	x := &c.rx
	for {
		x.mu.Lock()
		for x.owner != rxLoop { // Close gives it back too
			x.mu.Unlock()
			<-x.turn
			x.mu.Lock()
		}
		x.mu.Unlock()
		x.io.Lock()
		err := c.readConn()
		x.io.Unlock()
		c.rcv.flush()
		if err != nil && (c.closing.Load() || errors.Is(err, net.ErrClosed)) {
			return
		}
		x.mu.Lock()
		if x.want && x.in && !c.closing.Load() {
			x.owner, x.want = rxReader, false
			x.mu.Unlock()
			c.rcv.wake()
			continue
		}
		x.mu.Unlock()
	}
}
