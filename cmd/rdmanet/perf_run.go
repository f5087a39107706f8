//go:build linux

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Every message carries a sequence number in its first 8 bytes (little
// endian). A marker (sequence all ones, then the number of messages sent)
// ends a throughput run or a pingpong server.

func putSeq(b []byte, seq uint64) { binary.LittleEndian.PutUint64(b, seq) }
func getSeq(b []byte) uint64      { return binary.LittleEndian.Uint64(b) }

// sendMarkers sends a few end markers, a little apart, carrying total.
func sendMarkers(tx perfEP, total uint64) {
	m := make([]byte, perfMarkerSize)
	putSeq(m, perfMarker)
	binary.LittleEndian.PutUint64(m[8:], total)
	for i := range 5 {
		if i > 0 {
			time.Sleep(2 * time.Millisecond)
		}
		if tx.send(m) != nil {
			return
		}
	}
}

func closeAll(eps ...perfEP) {
	for _, ep := range eps {
		if ep != nil {
			ep.close()
		}
	}
}

// ---- pingpong ----

// echo answers every message from rx on tx until rx fails or a marker
// comes (stopOnMarker). It returns how many it answered.
func echo(rx, tx perfEP, served *atomic.Uint64, first, last *time.Time) error {
	buf := make([]byte, 65536)
	for {
		n, err := rx.recv(buf)
		if err != nil {
			return err
		}
		if n >= perfMinSize && getSeq(buf) == perfMarker {
			return nil
		}
		if err := tx.send(buf[:n]); err != nil {
			return err
		}
		if first != nil {
			now := time.Now()
			if first.IsZero() {
				*first = now
			}
			*last = now
		}
		served.Add(1)
	}
}

func (c *perfConfig) pingServer(e *env, pn *perfNet, res *perfResult) error {
	rx, err := pn.receiver(c.group)
	if err != nil {
		return err
	}
	defer rx.close()
	tx, err := pn.sender(c.group2)
	if err != nil {
		return err
	}
	defer tx.close()
	if err := c.checkSize(tx); err != nil {
		return err
	}
	perfStderr(e, "perf pingpong server: answering %s on %s; waiting for a client\n", c.group.IP, c.group2.IP)
	var served atomic.Uint64
	stop := c.startProgress(e, func(time.Duration) string { return fmt.Sprintf("%d answered", served.Load()) })
	var first, last time.Time
	cpu0 := cpuTime()
	err = echo(rx, tx, &served, &first, &last)
	cpu := cpuTime() - cpu0
	stop()
	if err != nil {
		return err
	}
	res.Count = served.Load()
	if el := last.Sub(first); el > 0 {
		res.Duration = el.Seconds()
		res.MsgsPerS = float64(res.Count) / el.Seconds()
		res.CPUPct = 100 * cpu.Seconds() / el.Seconds()
	}
	return nil
}

// pingClient measures round trips: send on group, wait for the answer on
// group2 with the same sequence number.
type pingClient struct {
	tx, rx  perfEP
	payload []byte
	rbuf    []byte
	seq     uint64
	dlSet   time.Time
}

// roundTrip returns the half round trip in ns, or ok=false when the
// answer did not come within perfPingTimeout.
func (p *pingClient) roundTrip() (ns int64, ok bool, err error) {
	p.seq++
	putSeq(p.payload, p.seq)
	t0 := time.Now()
	// Deadlines are absolute: refresh now and then, not per message.
	if t0.Sub(p.dlSet) > perfPingTimeout/4 {
		if err := p.rx.setReadDeadline(t0.Add(perfPingTimeout)); err != nil {
			return 0, false, err
		}
		p.dlSet = t0
	}
	if err := p.tx.send(p.payload); err != nil {
		return 0, false, err
	}
	for {
		n, err := p.rx.recv(p.rbuf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return 0, false, nil
			}
			return 0, false, err
		}
		if n >= perfMinSize && getSeq(p.rbuf) == p.seq {
			return time.Since(t0).Nanoseconds() / 2, true, nil
		}
		// A late answer to a round trip given up on: wait on.
	}
}

func (c *perfConfig) pingpong(e *env, pn *perfNet, res *perfResult) (err error) {
	if c.role == "server" {
		return c.pingServer(e, pn, res)
	}
	var tx, rx, sRx, sTx perfEP
	srvDone := make(chan error, 1)
	defer func() {
		closeAll(tx, rx, sRx)
		if sRx != nil {
			<-srvDone
		}
		closeAll(sTx)
	}()
	if tx, err = pn.sender(c.group); err != nil {
		return err
	}
	if rx, err = pn.receiver(c.group2); err != nil {
		return err
	}
	if err := c.checkSize(tx); err != nil {
		return err
	}
	if c.role == "" {
		if sRx, err = pn.receiver(c.group); err != nil {
			return err
		}
		if sTx, err = pn.sender(c.group2); err != nil {
			sRx.close()
			sRx = nil
			return err
		}
		go func() {
			var n atomic.Uint64
			srvDone <- echo(sRx, sTx, &n, nil, nil)
		}()
	}
	p := &pingClient{tx: tx, rx: rx, payload: make([]byte, c.size), rbuf: make([]byte, max(c.size, 65536))}
	// The first answer: the server may not be there yet.
	t0 := time.Now()
	for {
		_, ok, err := p.roundTrip()
		if err != nil {
			return err
		}
		if ok {
			break
		}
		if time.Since(t0) > perfServerWait {
			return fmt.Errorf("no answer on %s within %v: is `rdmanet perf pingpong -role server` running with the same -group?", c.group2.IP, perfServerWait)
		}
	}
	for range 100 { // warm up
		if _, _, err := p.roundTrip(); err != nil {
			return err
		}
	}
	capacity := c.count
	if capacity == 0 {
		capacity = 1 << 16
	}
	lat := make([]int64, 0, capacity)
	var done atomic.Uint64
	stop := c.startProgress(e, func(el time.Duration) string {
		n := done.Load()
		return fmt.Sprintf("%d round trips (%s/s)", n, fmtCount(float64(n)/el.Seconds()))
	})
	var lost uint64
	cpu0 := cpuTime()
	start := time.Now()
	for i := uint64(0); c.count == 0 || i < c.count; i++ {
		if c.duration > 0 && time.Since(start) >= c.duration {
			break
		}
		ns, ok, err := p.roundTrip()
		if err != nil {
			stop()
			return err
		}
		if ok {
			lat = append(lat, ns)
		} else {
			lost++
		}
		done.Add(1)
	}
	el := time.Since(start)
	cpu := cpuTime() - cpu0
	stop()
	if c.role == "client" {
		sendMarkers(tx, p.seq)
	}
	s := sortedCopy(lat)
	sum := summarize(s)
	res.Count = uint64(len(lat))
	res.Lost = lost
	res.Duration = el.Seconds()
	res.MsgsPerS = float64(len(lat)) / el.Seconds()
	res.GbitPerS = res.MsgsPerS * float64(2*c.size*8) / 1e9
	res.CPUPct = 100 * cpu.Seconds() / el.Seconds()
	res.MinNs, res.MeanNs, res.P50Ns, res.P90Ns = sum.Min, sum.Mean, sum.P50, sum.P90
	res.P99Ns, res.P999Ns, res.MaxNs = sum.P99, sum.P999, sum.Max
	res.Histogram = histogram(s)
	if res.Histogram == nil {
		res.Histogram = []histBucket{}
	}
	return nil
}

// ---- throughput ----

// rxState is one receiver's tally.
type rxState struct {
	received, bad uint64
	maxSeq1       uint64 // highest sequence number seen + 1
	total         uint64 // from a marker
	marker        bool
	first, last   time.Time
	progress      atomic.Uint64
	err           error
}

// receive counts messages from rx until a marker comes, or nothing has
// come for perfQuiet, or (firstWait > 0) nothing at all within firstWait.
func (c *perfConfig) receive(rx perfEP, st *rxState, firstWait time.Duration) {
	bufs := make([][]byte, c.batch)
	for i := range bufs {
		bufs[i] = make([]byte, max(c.size, perfMarkerSize))
	}
	ns := make([]int, c.batch)
	if firstWait > 0 {
		if err := rx.setReadDeadline(time.Now().Add(firstWait)); err != nil {
			st.err = err
			return
		}
	}
	var dlSet time.Time
	for {
		var n int
		var err error
		if c.batch == 1 {
			ns[0], err = rx.recv(bufs[0])
			if err == nil {
				n = 1
			}
		} else {
			n, err = rx.recvBatch(bufs, ns)
		}
		now := time.Now()
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				if st.first.IsZero() && !st.marker {
					st.err = fmt.Errorf("no message on %s within %v", c.group.IP, firstWait)
				}
			case errors.Is(err, net.ErrClosed):
			default:
				st.err = err
			}
			return
		}
		done := false
		got := uint64(0)
		for i := range n {
			b := bufs[i][:ns[i]]
			if len(b) < perfMinSize {
				st.bad++
				continue
			}
			seq := getSeq(b)
			if seq == perfMarker {
				if len(b) >= perfMarkerSize {
					st.total = binary.LittleEndian.Uint64(b[8:])
					st.marker = true
				}
				done = true
				continue
			}
			got++
			st.maxSeq1 = max(st.maxSeq1, seq+1)
		}
		if got > 0 {
			if st.first.IsZero() {
				st.first = now
			}
			st.last = now
			st.received += got
			st.progress.Store(st.received)
		}
		if done {
			return
		}
		if got > 0 && now.Sub(dlSet) > perfQuiet/4 {
			if err := rx.setReadDeadline(now.Add(perfQuiet)); err != nil {
				st.err = err
				return
			}
			dlSet = now
		}
	}
}

// send sends c.count messages (or for c.duration), paced to c.rate, and
// returns how many it sent and how long that took.
func (c *perfConfig) send(tx perfEP, sent *atomic.Uint64) (uint64, time.Duration, error) {
	k := uint64(c.batch)
	bufs := make([][]byte, k)
	for i := range bufs {
		bufs[i] = make([]byte, c.size)
	}
	var interval float64
	if c.rate > 0 {
		interval = 1e9 / c.rate
	}
	start := time.Now()
	var n uint64
	for c.count == 0 || n < c.count {
		m := k
		if c.count > 0 {
			m = min(k, c.count-n)
		}
		for i := range m {
			putSeq(bufs[i], n+i)
		}
		if interval > 0 {
			due := start.Add(time.Duration(float64(n) * interval))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		var err error
		if k == 1 {
			err = tx.send(bufs[0])
		} else {
			err = tx.sendBatch(bufs[:m])
		}
		if err != nil {
			return n, time.Since(start), err
		}
		n += m
		sent.Store(n)
		if c.duration > 0 && time.Since(start) >= c.duration {
			break
		}
	}
	return n, time.Since(start), nil
}

func (c *perfConfig) throughput(e *env, pn *perfNet, res *perfResult) (err error) {
	var tx perfEP
	var rxs []perfEP
	defer func() { closeAll(append(rxs, tx)...) }()
	if c.role != "send" {
		for range c.receivers {
			rx, err := pn.receiver(c.group)
			if err != nil {
				return err
			}
			rxs = append(rxs, rx)
		}
		if err := c.checkSize(rxs[0]); err != nil {
			return err
		}
	}
	if c.role != "recv" {
		if tx, err = pn.sender(c.group); err != nil {
			return err
		}
		if err := c.checkSize(tx); err != nil {
			return err
		}
	}
	firstWait := perfFirstWait
	if c.role == "recv" {
		firstWait = 0 // wait for a sender as long as it takes
		perfStderr(e, "perf throughput receiver: %d conn(s) on %s; waiting for a sender\n", len(rxs), c.group.IP)
	}
	sts := make([]rxState, len(rxs))
	var wg sync.WaitGroup
	for i, rx := range rxs {
		wg.Go(func() { c.receive(rx, &sts[i], firstWait) })
	}
	var sent atomic.Uint64
	stop := c.startProgress(e, func(el time.Duration) string {
		s := fmt.Sprintf("sent %d (%s/s)", sent.Load(), fmtCount(float64(sent.Load())/el.Seconds()))
		if c.role == "recv" {
			s = ""
		}
		for i := range sts {
			s += fmt.Sprintf("  rx%d %d", i+1, sts[i].progress.Load())
		}
		return s
	})
	cpu0 := cpuTime()
	start := time.Now()
	var n uint64
	var sendEl time.Duration
	var sendErr error
	if tx != nil {
		n, sendEl, sendErr = c.send(tx, &sent)
		if sendErr == nil {
			sendMarkers(tx, n)
		}
	}
	sendEnd := start.Add(sendEl)
	if sendErr != nil {
		for _, rx := range rxs {
			rx.close()
		}
	}
	wg.Wait()
	cpuEnd := cpuTime()
	stop()
	if sendErr != nil {
		return sendErr
	}
	end := sendEnd
	for i := range sts {
		if sts[i].err != nil {
			return fmt.Errorf("receiver %d: %w", i+1, sts[i].err)
		}
		if sts[i].last.After(end) {
			end = sts[i].last
		}
	}
	if wall := end.Sub(start); wall > 0 {
		res.CPUPct = 100 * (cpuEnd - cpu0).Seconds() / wall.Seconds()
	}
	res.Count = n
	if tx != nil {
		res.Duration = sendEl.Seconds()
		res.SendPerS = float64(n) / sendEl.Seconds()
	}
	var sumRate float64
	for i := range sts {
		st := &sts[i]
		exp := n
		if tx == nil {
			exp = max(st.total, st.maxSeq1)
		}
		r := perfReceiver{Received: st.received, Expected: exp, Bad: st.bad}
		if exp > 0 {
			got := min(st.received, exp)
			r.LossPct = 100 * float64(exp-got) / float64(exp)
		}
		if el := st.last.Sub(st.first); el > 0 {
			r.MsgsPerS = float64(st.received) / el.Seconds()
		}
		r.GbitPerS = r.MsgsPerS * float64(c.size*8) / 1e9
		sumRate += r.MsgsPerS
		res.Receivers = append(res.Receivers, r)
		res.LossPct = append(res.LossPct, r.LossPct)
		if tx == nil {
			res.Count = max(res.Count, exp)
			if el := st.last.Sub(st.first).Seconds(); el > res.Duration {
				res.Duration = el
			}
		}
	}
	if len(sts) > 0 {
		res.MsgsPerS = sumRate / float64(len(sts))
	} else {
		res.MsgsPerS = res.SendPerS
	}
	res.GbitPerS = res.MsgsPerS * float64(c.size*8) / 1e9
	if tx == nil && res.Duration > 0 {
		if wall := sts[0].last.Sub(sts[0].first); wall > 0 {
			res.CPUPct = 100 * (cpuEnd - cpu0).Seconds() / wall.Seconds()
		}
	}
	return nil
}
