//go:build linux

package main

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rdma/rdmanet/internal/perf"
)

// The loops and tallies are internal/perf's: every message carries a
// sequence number in its first 8 bytes, and a marker (perf.SendMarkers)
// ends a throughput run or a pingpong server.

// ---- pingpong ----

func (c *perfConfig) pingServer(e *env, pn *perfNet, res *perfResult) error {
	rx, err := pn.receiver(c.group)
	if err != nil {
		return err
	}
	defer rx.Close()
	tx, err := pn.sender(c.group2)
	if err != nil {
		return err
	}
	defer tx.Close()
	if err := c.checkSize(tx); err != nil {
		return err
	}
	perfStderr(e, "perf pingpong server: answering %s on %s; waiting for a client\n", c.group.IP, c.group2.IP)
	var tally perf.EchoTally
	stop := c.startProgress(e, func(time.Duration) string { return fmt.Sprintf("%d answered", tally.Served.Load()) })
	cpu0 := cpuTime()
	err = perf.Echo(rx, tx, &tally)
	cpu := cpuTime() - cpu0
	stop()
	if err != nil {
		return err
	}
	res.Count = tally.Served.Load()
	if el := tally.Last.Sub(tally.First); el > 0 {
		res.Duration = el.Seconds()
		res.MsgsPerS = perf.Rate(res.Count, el)
		res.CPUPct = 100 * cpu.Seconds() / el.Seconds()
	}
	return nil
}

func (c *perfConfig) pingpong(e *env, pn *perfNet, res *perfResult) (err error) {
	if c.role == "server" {
		return c.pingServer(e, pn, res)
	}
	var tx, rx, sRx, sTx perf.Endpoint
	srvDone := make(chan error, 1)
	defer func() {
		perf.CloseAll(tx, rx, sRx)
		if sRx != nil {
			<-srvDone
		}
		perf.CloseAll(sTx)
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
			sRx.Close()
			sRx = nil
			return err
		}
		go func() { srvDone <- perf.Echo(sRx, sTx, nil) }()
	}
	p := perf.NewPinger(tx, rx, c.size, perfPingTimeout)
	// The first answer: the server may not be there yet.
	t0 := time.Now()
	for {
		_, ok, err := p.RoundTrip()
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
		if _, _, err := p.RoundTrip(); err != nil {
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
		return fmt.Sprintf("%d round trips (%s/s)", n, fmtCount(perf.Rate(n, el)))
	})
	var lost uint64
	cpu0 := cpuTime()
	start := time.Now()
	for i := uint64(0); c.count == 0 || i < c.count; i++ {
		if c.duration > 0 && time.Since(start) >= c.duration {
			break
		}
		half, ok, err := p.RoundTrip()
		if err != nil {
			stop()
			return err
		}
		if ok {
			lat = append(lat, half.Nanoseconds())
		} else {
			lost++
		}
		done.Add(1)
	}
	el := time.Since(start)
	cpu := cpuTime() - cpu0
	stop()
	if c.role == "client" {
		perf.SendMarkers(tx, p.Seq())
	}
	s := perf.Sorted(lat)
	sum := perf.Summarize(s)
	res.Count = uint64(len(lat))
	res.Lost = lost
	res.Duration = el.Seconds()
	res.MsgsPerS = perf.Rate(res.Count, el)
	res.GbitPerS = perf.Gbit(res.MsgsPerS, 2*c.size)
	res.CPUPct = 100 * cpu.Seconds() / el.Seconds()
	res.MinNs, res.MeanNs, res.P50Ns, res.P90Ns = sum.Min, sum.Mean, sum.P50, sum.P90
	res.P99Ns, res.P999Ns, res.MaxNs = sum.P99, sum.P999, sum.Max
	res.Histogram = perf.Histogram(s)
	if res.Histogram == nil {
		res.Histogram = []perf.Bucket{}
	}
	return nil
}

// ---- throughput ----

func (c *perfConfig) throughput(e *env, pn *perfNet, res *perfResult) (err error) {
	var tx perf.Endpoint
	var rxs []perf.Endpoint
	defer func() { perf.CloseAll(append(rxs, tx)...) }()
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
	recv := perf.Receiver{Size: c.size, Batch: c.batch, Quiet: perfQuiet, FirstWait: perfFirstWait}
	if c.role == "recv" {
		recv.FirstWait = 0 // wait for a sender as long as it takes
		perfStderr(e, "perf throughput receiver: %d conn(s) on %s; waiting for a sender\n", len(rxs), c.group.IP)
	}
	sts := make([]perf.RxTally, len(rxs))
	errs := make([]error, len(rxs))
	var wg sync.WaitGroup
	for i, rx := range rxs {
		r := recv // a Receiver (its buffers) per goroutine
		wg.Go(func() { errs[i] = r.Run(rx, &sts[i]) })
	}
	var sent atomic.Uint64
	stop := c.startProgress(e, func(el time.Duration) string {
		s := fmt.Sprintf("sent %d (%s/s)", sent.Load(), fmtCount(perf.Rate(sent.Load(), el)))
		if c.role == "recv" {
			s = ""
		}
		for i := range sts {
			s += fmt.Sprintf("  rx%d %d", i+1, sts[i].Progress.Load())
		}
		return s
	})
	cpu0 := cpuTime()
	start := time.Now()
	var n uint64
	var sendEl time.Duration
	var sendErr error
	if tx != nil {
		f := perf.Flood{Size: c.size, Batch: c.batch, Count: c.count, Duration: c.duration, Rate: c.rate}
		n, sendEl, sendErr = f.Run(tx, &sent)
		if sendErr == nil {
			perf.SendMarkers(tx, n)
		}
	}
	sendEnd := start.Add(sendEl)
	if sendErr != nil {
		for _, rx := range rxs {
			rx.Close()
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
		if err := errs[i]; err != nil {
			if errors.Is(err, perf.ErrNoMessage) {
				err = fmt.Errorf("no message on %s within %v", c.group.IP, recv.FirstWait)
			}
			return fmt.Errorf("receiver %d: %w", i+1, err)
		}
		if sts[i].Last.After(end) {
			end = sts[i].Last
		}
	}
	if wall := end.Sub(start); wall > 0 {
		res.CPUPct = 100 * (cpuEnd - cpu0).Seconds() / wall.Seconds()
	}
	res.Count = n
	if tx != nil {
		res.Duration = sendEl.Seconds()
		res.SendPerS = perf.Rate(n, sendEl)
	}
	var sumRate float64
	for i := range sts {
		st := &sts[i]
		exp := n
		if tx == nil {
			exp = st.Expected()
		}
		r := perfReceiver{Received: st.Received, Expected: exp, Bad: st.Bad,
			LossPct: perf.LossPct(exp, st.Received), MsgsPerS: perf.Rate(st.Received, st.Last.Sub(st.First))}
		r.GbitPerS = perf.Gbit(r.MsgsPerS, c.size)
		sumRate += r.MsgsPerS
		res.Receivers = append(res.Receivers, r)
		res.LossPct = append(res.LossPct, r.LossPct)
		if tx == nil {
			res.Count = max(res.Count, exp)
			if el := st.Last.Sub(st.First).Seconds(); el > res.Duration {
				res.Duration = el
			}
		}
	}
	if len(sts) > 0 {
		res.MsgsPerS = sumRate / float64(len(sts))
	} else {
		res.MsgsPerS = res.SendPerS
	}
	res.GbitPerS = perf.Gbit(res.MsgsPerS, c.size)
	if tx == nil && res.Duration > 0 {
		if wall := sts[0].Last.Sub(sts[0].First); wall > 0 {
			res.CPUPct = 100 * (cpuEnd - cpu0).Seconds() / wall.Seconds()
		}
	}
	return nil
}
