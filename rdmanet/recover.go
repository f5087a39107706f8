package rdmanet

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Faults under a conn, and how it gets over them.
//
// Link down and up: the port reports PORT_ERR (rdma-core: the device's
// async event; rxe raises it when its netdev goes down) and writes fail
// with ErrLinkDown. A QP that was sending then ends in the error state
// (its sends complete with errors; on rxe a link flap does this), where
// nothing it posts leaves. Once the port is ACTIVE again, the conn takes
// the QP back to RTS through RESET, keeping its QP number, Q_Key and
// multicast attachments, so peers and groups need learn nothing new; it
// forgets the sends that were outstanding, posts its receive ring again,
// and makes its address handles anew (group AHs, and the unicast AH
// cache). Stats().Recoveries counts each reset; one that fails is tried
// again 100 ms later. A QP error with the port
// up (an async QP_FATAL, or a failed send completion) is recovered the
// same way at once. The QP says whether it needs a reset (QP.Ready) and
// does it (QP.Reset) on both backends: a failed send leaves a software QP
// in RTS (the kernel refused that datagram alone), and a software QP
// enters the error state only on QP_FATAL (injected in tests), where its
// Reset empties its receive queue and joins its groups again in place.
//
// Device removal: DEVICE_REMOVAL fails every call with ErrDeviceRemoved
// and the conn frees everything it holds on the device at once (QP, CQs,
// MRs, PD, AHs, cm id, channels), so that the kernel can finish removing
// it while the application still has the conn open. Close still works.

var (
	// ErrLinkDown is returned (in a *net.OpError) by writes while the
	// conn's port is down, for example when its netdev lost its link. The
	// conn recovers by itself once the port is up again.
	ErrLinkDown = errors.New("link down: the RDMA port is not active")
	// ErrQPError is returned (in a *net.OpError) by writes while the
	// conn's QP is in the error state and not yet reset. A reset that
	// fails is tried again 100 ms later, while the port is up.
	ErrQPError = errors.New("QP in the error state: the conn is resetting it")
)

// recoverRetry is how long a failed reset waits before the next try.
const recoverRetry = 100 * time.Millisecond

// recoverAfter is time.After for recoverLoop's wait; a test sees the
// waits through it.
var recoverAfter = time.After

// recoverNow is time.Now for the reset's schedule (recoverLoop and
// recoverLocked); a test pins the clock through it.
var recoverNow = time.Now

// recoverState is the fault state of a conn.
type recoverState struct {
	down    atomic.Bool  // PORT_ERR seen, PORT_ACTIVE not yet
	broken  atomic.Bool  // the QP is, or may be, in the error state
	pending atomic.Bool  // a reset is wanted: whoever holds rd.mu does it
	running atomic.Bool  // the recovery goroutine is on its way
	next    atomic.Int64 // no reset before this (UnixNano): a failed one waits
	// lent marks the receive slots lent by ReadLend: a reset must not
	// post them.
	lent []atomic.Uint64
}

// checkWrite is checkOpen for writes: a conn whose port is down or whose
// QP is broken cannot send, and says so.
func (c *Conn) checkWrite() error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	switch {
	case c.rec.down.Load():
		return fmt.Errorf("%w (%s port %d)", ErrLinkDown, c.local.Device, c.local.Port)
	case c.rec.broken.Load():
		return fmt.Errorf("%w (QP %#x on %s)", ErrQPError, c.self.QPN, c.local.Device)
	}
	return nil
}

// markLent records whether a receive slot is lent out.
func (c *Conn) markLent(slot uint64, lent bool) {
	if c.rec.lent == nil {
		return
	}
	w, bit := &c.rec.lent[slot/64], uint64(1)<<(slot%64)
	if lent {
		w.Or(bit)
	} else {
		w.And(^bit)
	}
}

// sendFailed notes a send that completed with an error: on a device the
// QP is then in the error state; a send the kernel refused on the
// software backend was that send's alone, and the QP, still in RTS, says
// so (QP.Ready). The event goroutine starts the reset (kickEvents): only
// it starts goroutines, so that none starts while Close waits for them.
func (c *Conn) sendFailed() {
	if c.rec.broken.Load() {
		return
	}
	if ready, err := c.qp.Ready(); err == nil && ready {
		return // the QP is fine: only that send failed
	}
	if c.rec.broken.Swap(true) {
		return
	}
	c.rec.pending.Store(true)
	c.kickEvents()
}

// handleFault acts on the port and QP events; the event goroutine calls
// it.
func (c *Conn) handleFault(ev verbs.Event) {
	switch ev.Type {
	case verbs.EventPortError:
		c.rec.down.Store(true)
	case verbs.EventPortActive:
		c.rec.down.Store(false)
		c.rec.pending.Store(true) // look at the QP: it may have failed meanwhile
	case verbs.EventQPError:
		c.rec.broken.Store(true)
		c.rec.pending.Store(true)
	}
}

// startRecovery starts the recovery goroutine if a reset is wanted and the
// port is up; the event goroutine calls it.
func (c *Conn) startRecovery() {
	if !c.rec.pending.Load() || c.rec.down.Load() || c.closed.Load() || c.fatalErr.Load() != nil {
		return
	}
	if c.rec.running.CompareAndSwap(false, true) {
		c.bg.Add(1)
		go c.recoverLoop()
	}
}

// recoverLoop gets the reset done: itself when rd.mu is free, else by
// waking the reader that holds it (a blocked ReadFrom: its WaitPoll
// returns), whose next poll does it (repostConsumed).
func (c *Conn) recoverLoop() {
	defer c.bg.Done()
	defer c.rec.running.Store(false)
	for c.rec.pending.Load() && !c.rec.down.Load() && c.ctx.Err() == nil && c.fatalErr.Load() == nil {
		if c.rd.mu.TryLock() {
			c.recoverLocked()
			c.rd.mu.Unlock()
			if !c.rec.pending.Load() {
				return
			}
		} else {
			c.rd.waiter.Wake() // the reader returns, and its next poll resets
		}
		wait := max(time.Millisecond, time.Unix(0, c.rec.next.Load()).Sub(recoverNow()))
		select {
		case <-c.ctx.Done():
			return
		case <-recoverAfter(wait):
		}
	}
}

// recoverLocked resets the QP if it needs it and the time has come; rd.mu
// is held.
func (c *Conn) recoverLocked() {
	if !c.rec.pending.Load() || c.rec.down.Load() || recoverNow().UnixNano() < c.rec.next.Load() {
		return
	}
	c.lockBelowRead()
	defer c.unlockBelowRead()
	if c.closed.Load() || c.fatalErr.Load() != nil {
		// Nothing left to reset.
		c.rec.broken.Store(false)
		c.rec.pending.Store(false)
		return
	}
	if ready, err := c.qp.Ready(); err == nil && ready && !c.rec.broken.Load() {
		c.rec.pending.Store(false) // the QP never failed
		return
	}
	if err := c.qp.Reset(); err != nil {
		// ErrPortDown: the send failures came before PORT_ERR did; the
		// port event stops the tries, or the next one succeeds.
		c.rec.next.Store(recoverNow().Add(recoverRetry).UnixNano())
		return
	}
	c.rec.next.Store(recoverNow().Add(recoverRetry).UnixNano())
	c.reclaimSends()
	c.reclaimRecvs()
	c.refreshAHs()
	c.rec.broken.Store(false)
	c.rec.pending.Store(false)
	atomic.AddUint64(&c.ctr.recoveries, 1)
}

// reclaimSends forgets the sends a reset discarded: their completions
// (flushed, in error) are collected and every slot is free again. Their
// failures are counted (SendErrors) but not returned by the next write:
// the QP error explains them, and the writes meanwhile failed with
// ErrLinkDown or ErrQPError.
func (c *Conn) reclaimSends() {
	for {
		n, err := c.reapSends()
		if n == 0 || err != nil {
			break
		}
	}
	c.wr.tail = c.wr.head
	c.wr.signaled = c.wr.head
	c.wr.pending = nil
}

// reclaimRecvs posts the receive ring again after a reset emptied the
// receive queue: every slot but those whose completions wait to be read
// and those lent out. Completions still in the CQ are from before the
// reset; their datagrams are counted as dropped.
func (c *Conn) reclaimRecvs() {
	r := &c.rd
	wcs := make([]verbs.WC, recvBatch)
	for {
		n, err := c.qp.RecvCQ().Poll(wcs)
		for _, wc := range wcs[:n] {
			if wc.Status == verbs.WCSuccess {
				atomic.AddUint64(&c.ctr.resetDrops, 1)
			}
		}
		if n == 0 || err != nil {
			break
		}
	}
	depth := c.cfg.RecvDepth
	held := make([]bool, depth)
	for _, wc := range r.wcs[r.head : r.head+r.count] {
		held[wc.WRID] = true
	}
	for i := range held {
		if c.rec.lent != nil && c.rec.lent[i/64].Load()&(1<<(i%64)) != 0 {
			held[i] = true
		}
	}
	r.repost = r.repost[:0]
	c.lend.returned = c.lend.returned[:0]
	for i, h := range held {
		if !h {
			r.repost = append(r.repost, c.recvWR(uint64(i)))
		}
	}
	c.flushReposts() // a failure shows up as overflow drops
}

// refreshAHs makes every address handle anew: the groups' and the unicast
// cache's (dropped; made again on the next send).
func (c *Conn) refreshAHs() {
	for _, m := range c.grp.byMGID {
		ah, err := c.qp.CreateAH(m.m.AH)
		if err != nil {
			continue // the old one stays
		}
		m.ah.Close()
		m.ah = ah
	}
	for g, ah := range c.wr.ahs {
		ah.Close()
		delete(c.wr.ahs, g)
	}
}

// releaseDevice frees everything the conn holds on a removed device, at
// once, so that the kernel can finish removing it; the event goroutine
// calls it after failing every call (fatalErr) and waking every waiter.
// Close later frees the memory and the rest.
func (c *Conn) releaseDevice() {
	c.lockAll()
	defer c.unlockAll()
	if c.closed.Load() {
		return
	}
	c.id.Close() // QP, AHs, CQs, channels, MRs, PD, cm id: errors are expected now
}
