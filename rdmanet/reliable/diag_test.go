package reliable

import (
	"fmt"
	"strings"
)

// rxDump describes c's receive state for each sender it tracks and the
// memos it keeps, for a test that found a receiver stuck.
func rxDump(c *Conn) string {
	r := &c.rcv
	r.mu.Lock()
	defer r.mu.Unlock()
	now := c.now()
	var b strings.Builder
	fmt.Fprintf(&b, "rLen %d pending %d memos %d;", r.rLen, r.pending, len(r.memos))
	for k, p := range r.peers {
		fmt.Fprintf(&b, " peer %v/%d: next %d contig %d high %d nextMsg %d lost %d skipTo %d queued %v joining %v ring %d heard %v ago tx %d nak{state %d due %+dµs tries %d end %d} long [%d,%d);",
			k.addr, k.session, p.next, p.contig, p.high, p.nextMsg, p.lost, p.skipTo, p.queued, p.joining, p.ri.n,
			(now-p.heard)/1e6, p.tx, p.nak.state, (p.nak.due-now)/1e3, p.nak.tries, p.nak.end, p.longStart, p.longEnd)
	}
	for k, m := range r.memos {
		fmt.Fprintf(&b, " memo %v/%d: seq %d msg %d resume %v;", k.addr, k.session, m.seq, m.msg, m.resume)
	}
	return b.String()
}

// txDump describes c's send state: its position, its window and what it
// knows of its receivers.
func txDump(c *Conn) string {
	s := &c.snd
	s.mu.Lock()
	defer s.mu.Unlock()
	now := c.now()
	var b strings.Builder
	fmt.Fprintf(&b, "next %d nextMsg %d tx %d window %d hbEvery %v lastSend %vms ago;", s.next, s.nextMsg, s.tx, s.wi.n, s.hbEvery, (now-s.lastSend)/1e6)
	for k, r := range s.receivers {
		fmt.Fprintf(&b, " receiver %v/%d: pos %d limit %d heard %vms ago;", k.addr, k.session, r.pos, r.limit, (now-r.heard)/1e6)
	}
	return b.String()
}
