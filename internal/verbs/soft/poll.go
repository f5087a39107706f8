//go:build linux

package soft

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Poll planning: which socket a Poll reads first, whether it asks the
// epoll set, and how many datagrams a read after a wake takes.

// pace is how much a read after a wake asks for, learnt from the traffic.
type pace uint8

const (
	// paceStream: wakes find several datagrams; read whole batches.
	paceStream pace = iota
	// paceSingle: each wake brings one datagram (request/response); read
	// one slot, which saves recvmmsg's extra attempt.
	paceSingle
	// paceProbe: a one-slot read happened; the next look tells whether
	// more were already waiting (a stream) or not.
	paceProbe
)

// pollPlan is how one Poll reads: which sockets may hold datagrams
// (drained: known empty), which to read first, and how.
type pollPlan struct {
	drained [2]bool
	start   int
	single  bool // the first read takes one slot (paceSingle)
	probing bool // a one-slot read came before: a datagram found now means a stream
	woken   bool // the channel just woke the waiter
	direct  bool // sleeping narrow: the unicast socket was read only if pending
}

// Poll reads datagrams into the posted receive buffers, at most as many as
// there are posted receives and as fit in wcs, validates them (headers,
// Q_Key, destination, ICRC), fills the GRH area and returns their
// completions. Datagrams that fail validation are dropped and counted by
// reason, and their buffers stay posted. It never blocks.
func (c *recvCQ) Poll(wcs []verbs.WC) (int, error) { return c.poll(wcs, false) }

// poll is Poll; woken says that the channel just woke the waiter (which
// alone passes true: recvWaiter.Poll), so something is there.
func (c *recvCQ) poll(wcs []verbs.WC, woken bool) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.q.usable("ibv_poll_cq", c.closed); err != nil {
		return 0, err
	}
	if c.n == 0 {
		c.groNoReceives() // polled with no receive posted (gro.go)
		return 0, nil
	}
	if c.gro.pending() { // what the last read left comes first (gro.go)
		n := c.completeCopied(wcs)
		c.gro.release()
		if n > 0 || c.gro.pending() {
			return n, nil
		}
	}
	if c.full {
		c.full = false
		if len(c.msgs) < c.maxScratch {
			c.growScratch(min(2*len(c.msgs), c.maxScratch))
		}
	}
	var p pollPlan
	var err error
	turn := c.turn // which socket a read not after a wake starts with
	c.turn ^= 1
	switch {
	case woken:
		p = c.planWoken()
	case c.mode.narrow():
		p = c.planNarrow(turn)
	default:
		if p, err = c.planWide(turn); err != nil {
			return 0, err
		}
	}
	n, err := c.read(&p, wcs)
	if p.direct && !p.drained[1] {
		c.uniPending.Store(true) // not read dry: read it next time
	}
	return n, err
}

// planWoken: just woken by the channel, so something is there, most
// likely where the last datagram came from: read there first.
func (c *recvCQ) planWoken() pollPlan {
	return pollPlan{start: c.last, woken: true, single: c.pace != paceStream}
}

// planNarrow: sleeping narrow, read the multicast socket directly (a
// one-slot read that finds nothing costs less than the epoll_wait), and
// the unicast socket only when the watch saw datagrams there or the mode
// just became narrow: otherwise its datagrams kick the waiter, which then
// polls again.
func (c *recvCQ) planNarrow(turn int) pollPlan {
	p := pollPlan{start: turn, direct: true, single: c.pace != paceStream}
	p.drained[1] = !(c.uniPending.Load() && c.uniPending.Swap(false))
	if c.pace == paceProbe {
		p.probing, c.pace = true, paceSingle
	}
	return p
}

// planWide: sleeping wide, ask the channel set which sockets have
// datagrams, one syscall for both, and read only those.
func (c *recvCQ) planWide(turn int) (pollPlan, error) {
	p := pollPlan{start: turn, drained: [2]bool{true, true}}
	nev, err := epollWait(c.wideFd, c.evs[:])
	if err != nil && err != unix.EINTR {
		return p, fmt.Errorf("soft: ibv_poll_cq: %w", os.NewSyscallError("epoll_wait", err))
	}
	if c.pace == paceProbe {
		// The last wake read one datagram; more already waiting means
		// a stream, where wakes should read whole batches.
		c.pace = paceSingle
		if nev > 0 {
			c.pace = paceStream
		}
	}
	for _, ev := range c.evs[:max(nev, 0)] {
		if int(ev.Fd) == c.q.mcFd {
			p.drained[0] = false
		} else if int(ev.Fd) == c.q.uniFd {
			p.drained[1] = false
		}
	}
	c.mcDry = c.mcDry || p.drained[0] // an empty multicast socket is dry too
	return p, nil
}

// read reads as p says until a completion is found or both sockets are
// dry: a reader sleeps on the channel only after Poll returned 0, and the
// channel must not be readable then (bad datagrams are dropped on the
// way).
func (c *recvCQ) read(p *pollPlan, wcs []verbs.WC) (int, error) {
	socks := [2]int{c.q.mcFd, c.q.uniFd}
	n := 0
	for round := 0; n < len(wcs) && c.n > 0 && !(p.drained[0] && p.drained[1]); round++ {
		s := (p.start + round) & 1
		if p.drained[s] {
			continue
		}
		k := min(len(wcs)-n, c.n, len(c.msgs))
		if p.single && n == 0 {
			// A waiter that slept wants one datagram soon; anything
			// else queued stays for the next Poll (the channel stays
			// readable).
			k = 1
			c.pace = paceProbe
		}
		got, err := c.recv(socks[s], k, c.chooseBare(s))
		if err == unix.EAGAIN {
			p.drained[s] = true
			c.mcDry = c.mcDry || s == 0
			continue
		}
		if err != nil {
			return n, fmt.Errorf("soft: ibv_poll_cq: %w", os.NewSyscallError("recvmmsg", err))
		}
		if got < k {
			p.drained[s] = true
			c.mcDry = c.mcDry || s == 0
		} else if got == len(c.msgs) {
			c.full = true // a stream: read bigger batches from the next Poll
		}
		n += c.complete(s, got, wcs[n:])
		c.learn(p, s, got) // got >= 1: a read that got nothing failed (EAGAIN)
		if n > 0 && (p.drained[s] || p.single) {
			// Deliver now rather than spend a syscall on the other
			// socket; the next Poll starts there.
			break
		}
	}
	return n, nil
}

// learn notes where got datagrams came from and what that says of the
// traffic.
func (c *recvCQ) learn(p *pollPlan, sock, got int) {
	c.last = sock
	if sock == 1 {
		c.mode.heard()
	}
	switch {
	case p.probing && sock == 0:
		c.pace = paceStream // one was already waiting: a stream
	case p.woken && !p.single && got == 1:
		c.pace = paceSingle // one datagram per wake: request/response
	}
}

// chooseBare decides whether the read of socket sock is bare (no control
// messages) and sets the multicast socket's IP_RECVORIGDSTADDR to match.
func (c *recvCQ) chooseBare(sock int) bool {
	c.bare, c.bareDst = false, [4]byte{}
	if c.q.addrOnly {
		if sock == 1 {
			c.bare, c.bareDst = true, c.q.unicast
		} else if c.soleOK && c.mcDry {
			c.bare, c.bareDst = true, c.sole
		}
		if sock == 0 {
			c.mcOrigDst(!c.bare)
		}
	}
	if c.bare {
		c.nBare++
	}
	return c.bare
}
