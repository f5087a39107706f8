package perf

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// EchoTally is what Echo counts: the datagrams it answered and when it
// answered the first and the last.
type EchoTally struct {
	Served      atomic.Uint64
	First, Last time.Time
}

// Echo answers every datagram from rx on tx, the same bytes, until rx
// fails (its error) or a marker comes (nil). With a tally it counts the
// answers and times the first and the last; with nil it reads no clock.
func Echo(rx, tx Endpoint, t *EchoTally) error {
	buf := make([]byte, 65536)
	for {
		n, err := rx.Recv(buf)
		if err != nil {
			return err
		}
		if n >= SeqSize && Seq(buf) == Marker {
			return nil
		}
		if err := tx.Send(buf[:n]); err != nil {
			return err
		}
		if t != nil {
			now := time.Now()
			if t.First.IsZero() {
				t.First = now
			}
			t.Last = now
			t.Served.Add(1)
		}
	}
}

// Pinger times round trips: it sends a numbered message through one
// endpoint and waits on another (or the same) for the answer with the
// same number.
type Pinger struct {
	tx, rx  Endpoint
	timeout time.Duration
	payload []byte
	rbuf    []byte
	seq     uint64
	dlSet   time.Time
}

// NewPinger returns a Pinger of size-byte messages (at least SeqSize)
// that gives a round trip up after timeout.
func NewPinger(tx, rx Endpoint, size int, timeout time.Duration) *Pinger {
	return &Pinger{tx: tx, rx: rx, timeout: timeout, payload: make([]byte, max(size, SeqSize)), rbuf: make([]byte, max(size, 65536))}
}

// Seq is the sequence number of the last round trip started.
func (p *Pinger) Seq() uint64 { return p.seq }

// RoundTrip sends one message and waits for its answer. It returns half
// the round trip, or ok false when no answer came within the timeout;
// answers to earlier round trips (late ones) are skipped.
func (p *Pinger) RoundTrip() (half time.Duration, ok bool, err error) {
	p.seq++
	PutSeq(p.payload, p.seq)
	t0 := time.Now()
	// Deadlines are absolute: refresh now and then, not per message
	// (a deadline per round trip costs its call and makes no answer come
	// sooner: docs/runs/rxe2-cadence-2026-12-02-1850.txt).
	if t0.Sub(p.dlSet) > p.timeout/4 {
		if err := p.rx.SetReadDeadline(t0.Add(p.timeout)); err != nil {
			return 0, false, err
		}
		p.dlSet = t0
	}
	if err := p.tx.Send(p.payload); err != nil {
		return 0, false, err
	}
	for {
		n, err := p.rx.Recv(p.rbuf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return 0, false, nil
			}
			return 0, false, err
		}
		if n >= SeqSize && Seq(p.rbuf) == p.seq {
			return time.Since(t0) / 2, true, nil
		}
	}
}

// Flood is a sender's loop: messages of Size bytes, Batch a call (1:
// Send, more: SendBatch), paced to Rate messages a second (0: flat out),
// until Count were sent (0: no count), Duration has passed (0: no limit)
// or Stop is closed (nil: never). Message i carries sequence number i.
type Flood struct {
	Size, Batch int
	Count       uint64
	Duration    time.Duration
	Rate        float64
	Stop        <-chan struct{}
}

// Run floods through tx, storing the count sent so far into sent after
// every call, and returns how many it sent and how long that took.
func (f *Flood) Run(tx Endpoint, sent *atomic.Uint64) (uint64, time.Duration, error) {
	k := uint64(max(f.Batch, 1))
	bufs := make([][]byte, k)
	for i := range bufs {
		bufs[i] = make([]byte, max(f.Size, SeqSize))
	}
	var interval float64
	if f.Rate > 0 {
		interval = 1e9 / f.Rate
	}
	start := time.Now()
	var n uint64
	for f.Count == 0 || n < f.Count {
		if f.Stop != nil {
			select {
			case <-f.Stop:
				return n, time.Since(start), nil
			default:
			}
		}
		m := k
		if f.Count > 0 {
			m = min(k, f.Count-n)
		}
		for i := range m {
			PutSeq(bufs[i], n+i)
		}
		if interval > 0 {
			due := start.Add(time.Duration(float64(n) * interval))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		var err error
		if k == 1 {
			err = tx.Send(bufs[0])
		} else {
			err = tx.SendBatch(bufs[:m])
		}
		if err != nil {
			return n, time.Since(start), err
		}
		n += m
		sent.Store(n)
		if f.Duration > 0 && time.Since(start) >= f.Duration {
			break
		}
	}
	return n, time.Since(start), nil
}

// RxTally is what a receiver counted.
type RxTally struct {
	Received uint64 // numbered messages
	Bad      uint64 // datagrams too short to carry a sequence number
	MaxSeq1  uint64 // the highest sequence number seen, plus one
	Total    uint64 // what a marker said was sent
	Marker   bool   // a marker came
	// First and Last are when the first and the last numbered messages
	// were read.
	First, Last time.Time
	// FirstRead is how many numbered messages the first read that
	// brought any carried: a rate from First to Last counts only those
	// after them (Received - FirstRead), the ones that took that time.
	FirstRead uint64
	// Progress is Received, for another goroutine to read meanwhile.
	Progress atomic.Uint64
}

// ErrNoMessage is Receiver.Run's error when nothing came within
// FirstWait.
var ErrNoMessage = errors.New("perf: no message")

// Receiver is a receiver's loop: it reads Batch datagrams a call (1:
// Recv, more: RecvBatch) of up to Size bytes and counts them, until a
// marker comes, Limit messages came (0: no limit), nothing came for Quiet
// after the first (0: no deadline), or (FirstWait > 0) nothing at all
// came within FirstWait. The quiet deadline is moved at most every
// Quiet/4, on a read that brought messages, not on every read: the run
// ends between 3/4 Quiet and Quiet after the last message.
//
// Its buffers are made on the first Run and kept for the next, so that a
// benchmark can warm up with one Run and time another without
// allocating: a Receiver serves one goroutine, and a copy made after its
// first Run shares its buffers. Give each receiving goroutine a Receiver
// of its own.
type Receiver struct {
	Size, Batch int
	Limit       uint64
	Quiet       time.Duration
	FirstWait   time.Duration
	// OnFirst, if set, is called once a Run, after the first read that
	// brought numbered messages: where a benchmark starts counting what
	// the stream costs.
	OnFirst func()
	bufs    [][]byte
	ns      []int
}

// buffers returns Batch buffers of Size bytes (at least MarkerSize) and
// their lengths' slice, made once.
func (r *Receiver) buffers() ([][]byte, []int) {
	k, size := max(r.Batch, 1), max(r.Size, MarkerSize)
	if len(r.bufs) != k || len(r.bufs[0]) < size {
		r.bufs = make([][]byte, k)
		for i := range r.bufs {
			r.bufs[i] = make([]byte, size)
		}
		r.ns = make([]int, k)
	}
	return r.bufs, r.ns
}

// Run counts what rx receives into t. It returns nil at a marker, at the
// limit, at the quiet deadline or when rx is closed (net.ErrClosed);
// ErrNoMessage when the first wait passed with nothing; else the read's
// error.
func (r *Receiver) Run(rx Endpoint, t *RxTally) error {
	bufs, ns := r.buffers()
	k := len(bufs)
	if r.FirstWait > 0 {
		if err := rx.SetReadDeadline(time.Now().Add(r.FirstWait)); err != nil {
			return err
		}
	}
	var dlSet time.Time
	for {
		var n int
		var err error
		if k == 1 {
			ns[0], err = rx.Recv(bufs[0])
			if err == nil {
				n = 1
			}
		} else {
			n, err = rx.RecvBatch(bufs, ns)
		}
		now := time.Now()
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				if t.First.IsZero() && !t.Marker && r.FirstWait > 0 {
					return ErrNoMessage
				}
				return nil
			case errors.Is(err, net.ErrClosed):
				return nil
			}
			return err
		}
		done, got := t.count(bufs[:n], ns[:n])
		if got > 0 {
			first := t.First.IsZero()
			if first {
				t.First, t.FirstRead = now, got
			}
			t.Last = now
			t.Received += got
			t.Progress.Store(t.Received)
			if first && r.OnFirst != nil {
				r.OnFirst()
			}
		}
		if done || (r.Limit > 0 && t.Received >= r.Limit) {
			return nil
		}
		if r.Quiet > 0 && got > 0 && now.Sub(dlSet) > r.Quiet/4 {
			if err := rx.SetReadDeadline(now.Add(r.Quiet)); err != nil {
				return err
			}
			dlSet = now
		}
	}
}

// count tallies one read's datagrams (bufs[i][:ns[i]]): it returns
// whether a marker was among them and how many numbered messages.
func (t *RxTally) count(bufs [][]byte, ns []int) (marker bool, got uint64) {
	for i, b := range bufs {
		b = b[:ns[i]]
		if len(b) < SeqSize {
			t.Bad++
			continue
		}
		seq := Seq(b)
		if seq == Marker {
			if total, ok := markerTotal(b); ok {
				t.Total, t.Marker = total, true
			}
			marker = true
			continue
		}
		got++
		t.MaxSeq1 = max(t.MaxSeq1, seq+1)
	}
	return marker, got
}
