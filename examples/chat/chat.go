package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/go-rdma/rdmanet/rdmanet/reliable"
)

// Options configure a Chat.
type Options struct {
	Nick      string
	Group     *net.UDPAddr
	Iface     *net.Interface       // nil: loopback (or Listen.LocalAddr's)
	Listen    rdmanet.ListenConfig // backend, bind address, loopback
	Heartbeat time.Duration        // how often to say "still here"
	DropEvery int                  // testing: skip sending every Nth msg, as if the network lost it
	Reliable  bool                 // run over rdmanet/reliable: lines arrive once, in order, or loss is reported
	joinWait  time.Duration        // bound on the group join
	noBye     bool                 // tests: vanish without a bye, as a crash would
	session   uint64               // tests: a fixed session id
	now       func() time.Time     // tests: a clock
}

// Chat is one member of a chat group: a rdmanet conn, the roster of the
// others, and a display.
type Chat struct {
	opt      Options
	conn     *rdmanet.Conn
	pc       net.PacketConn // conn, or rel on it
	rel      *reliable.Conn // with Options.Reliable
	disp     Display
	session  uint64
	interval uint16 // heartbeat interval on the wire, ms

	mu        sync.Mutex // everything below
	seq       uint32     // number of the last msg sent
	roster    *Roster
	sent      uint64 // msgs sent (or dropped on purpose, see injected)
	injected  uint64 // msgs not sent because of DropEvery
	refused   uint64 // msgs too long for a datagram
	datagrams struct {
		sent, received, ignored uint64
	}
	warned map[string]bool // senders of other protocol versions, told once
}

// Open joins the group and returns a Chat ready to Run.
func Open(ctx context.Context, opt Options, disp Display) (*Chat, error) {
	if err := ValidNick(opt.Nick); err != nil {
		return nil, err
	}
	if opt.Heartbeat <= 0 {
		opt.Heartbeat = defaultInterval
	}
	opt.Heartbeat = min(max(opt.Heartbeat, 10*time.Millisecond), 60*time.Second)
	if opt.now == nil {
		opt.now = time.Now
	}
	if opt.joinWait <= 0 {
		opt.joinWait = 30 * time.Second
	}
	c := &Chat{
		opt:      opt,
		disp:     disp,
		session:  opt.session,
		interval: uint16(opt.Heartbeat / time.Millisecond),
		roster:   NewRoster(),
		warned:   map[string]bool{},
	}
	for c.session == 0 {
		var b [8]byte
		rand.Read(b[:])
		c.session = binary.BigEndian.Uint64(b[:])
	}
	jctx, cancel := context.WithTimeout(ctx, opt.joinWait)
	defer cancel()
	var err error
	c.conn, err = opt.Listen.ListenMulticast(jctx, "rdma", opt.Iface, opt.Group)
	if err != nil {
		return nil, err
	}
	c.pc = c.conn
	if opt.Reliable {
		c.rel, err = reliable.New(c.conn, opt.Group, reliable.Config{})
		if err != nil {
			c.conn.Close()
			return nil, err
		}
		c.pc = c.rel
	}
	return c, nil
}

// Run announces this member, then shows what arrives and sends what is
// typed until /quit, the end of input, or ctx ends. It says bye and leaves
// the group before it returns.
func (c *Chat) Run(ctx context.Context) error {
	defer c.pc.Close()
	if err := c.send(Hello, ""); err != nil {
		return err
	}
	b := c.conn.Backend()
	c.disp.Println(fmt.Sprintf("* joined %s as %s: %s backend, %s (%s), MTU %d; /help for commands",
		c.opt.Group.IP, c.opt.Nick, b.Name, b.Device, b.Netdev, c.conn.MTU()))
	if c.rel != nil {
		c.disp.Println(fmt.Sprintf("* reliable: every line arrives once and in order, or its loss is reported; lines up to %d bytes", c.MaxText()))
	}

	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(2)
	go func() { defer wg.Done(); c.receive() }()
	go func() { defer wg.Done(); c.heartbeats(ctx) }()

	lines := make(chan string)
	inputErr := make(chan error, 1)
	go func() {
		for {
			line, err := c.disp.ReadLine()
			if err != nil {
				inputErr <- err
				return
			}
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
	}()

	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err = <-inputErr:
			if errors.Is(err, errQuit) || errors.Is(err, io.EOF) {
				err = nil
			}
			break loop // end of input: leave as /quit does
		case line := <-lines:
			if quit := c.command(line); quit {
				break loop
			}
		}
	}
	cancel()
	if !c.opt.noBye {
		c.send(Bye, "")
	}
	c.pc.Close() // leaves the group (reliable: after its linger), ends receive
	wg.Wait()
	c.disp.Println(fmt.Sprintf("* left %s", c.opt.Group.IP))
	return err
}

// command handles one line of input and reports whether to quit.
func (c *Chat) command(line string) (quit bool) {
	line = strings.TrimRight(line, "\r\n")
	switch {
	case line == "":
		return false
	case strings.HasPrefix(line, "//"):
		line = line[1:] // "//x" sends "/x"
	case strings.HasPrefix(line, "/"):
		cmd, _, _ := strings.Cut(line, " ")
		switch cmd {
		case "/quit", "/exit":
			return true
		case "/who":
			c.who()
		case "/stats":
			c.stats()
		case "/help":
			c.help()
		default:
			c.disp.Println(fmt.Sprintf("! unknown command %s: try /help", cmd))
		}
		return false
	}
	if err := c.send(Msg, line); err != nil {
		c.disp.Println("! " + err.Error())
	} else if c.disp.Echo() && (!c.conn.MulticastLoopback() || c.rel != nil) {
		// A terminal shows your own lines like the others'; with
		// -loopback they come back through the group instead (not with
		// -reliable, which never reads its own).
		c.disp.Println(fmt.Sprintf("<%s> %s", c.opt.Nick, sanitize(line)))
	}
	return false
}

// errTooLong is the note a line too long for one datagram gets.
type errTooLong struct{ n, max, mtu int }

func (e *errTooLong) Error() string {
	return fmt.Sprintf("not sent: %d bytes of text, at most %d fit in one datagram (MTU %d); UD multicast does not split messages", e.n, e.max, e.mtu)
}

// MaxText is the longest line this chat can send.
func (c *Chat) MaxText() int {
	if c.rel != nil {
		return MaxText(c.rel.MaxMessage(), c.opt.Nick)
	}
	return MaxText(c.conn.MTU(), c.opt.Nick)
}

// send sends one datagram of type t to the group.
func (c *Chat) send(t Type, text string) error {
	text = strings.ToValidUTF8(text, "\uFFFD")
	if t == Msg && len(text) > c.MaxText() {
		c.mu.Lock()
		c.refused++
		c.mu.Unlock()
		return &errTooLong{len(text), c.MaxText(), c.conn.MTU()}
	}
	c.mu.Lock()
	if t == Msg {
		c.seq++
		c.sent++
	}
	p := Packet{Type: t, Session: c.session, Seq: c.seq, Interval: c.interval, Nick: c.opt.Nick, Text: text}
	drop := t == Msg && c.opt.DropEvery > 0 && c.seq%uint32(c.opt.DropEvery) == 0
	if drop {
		c.injected++
	} else {
		c.datagrams.sent++
	}
	c.mu.Unlock()
	if drop {
		return nil // as if the network lost it; the number is used up
	}
	b, err := p.Append(nil)
	if err == nil {
		_, err = c.pc.WriteTo(b, c.opt.Group)
	}
	if err != nil {
		return fmt.Errorf("send %s: %w", t, err)
	}
	return nil
}

// heartbeats says "still here" every interval and times out the silent.
func (c *Chat) heartbeats(ctx context.Context) {
	sweep := min(c.opt.Heartbeat/2, 250*time.Millisecond)
	t := time.NewTicker(sweep)
	defer t.Stop()
	last := c.opt.now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := c.opt.now()
		if now.Sub(last) >= c.opt.Heartbeat {
			last = now
			if err := c.send(Heartbeat, ""); err != nil && ctx.Err() == nil {
				c.disp.Println("! " + err.Error())
			}
		}
		c.mu.Lock()
		for _, m := range c.roster.Expire(now) {
			c.disp.Println(fmt.Sprintf("* %s timed out", m.Nick))
		}
		c.mu.Unlock()
	}
}

// receive shows what arrives until the conn closes.
func (c *Chat) receive() {
	buf := make([]byte, 1<<16)
	for {
		n, from, err := c.pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var loss *reliable.LossError
			if errors.As(err, &loss) {
				c.disp.Println(fmt.Sprintf("! reliable: %d messages from %s lost: they left its retransmit window", loss.Messages, &loss.From))
				continue
			}
			c.disp.Println("! receive: " + err.Error())
			if errors.Is(err, rdmanet.ErrDeviceRemoved) {
				return
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		c.handle(buf[:n], from.String())
	}
}

// handle processes one received datagram.
func (c *Chat) handle(b []byte, from string) {
	p, err := Decode(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.datagrams.ignored++
		if errors.Is(err, ErrVersion) && !c.warned[from] {
			c.warned[from] = true
			c.disp.Println(fmt.Sprintf("! ignoring datagrams from %s: %v", from, err))
		}
		return
	}
	c.datagrams.received++
	if p.Session == c.session {
		// Our own, back through multicast loopback (-loopback).
		if p.Type == Msg {
			c.disp.Println(fmt.Sprintf("<%s> %s", p.Nick, sanitize(p.Text)))
		}
		return
	}
	m, ev, _ := c.roster.Observe(&p, from, c.opt.now())
	switch ev {
	case Stray:
		return
	case Joined:
		c.disp.Println(fmt.Sprintf("* %s joined", m.Nick))
	case Here:
		c.disp.Println(fmt.Sprintf("* %s is here", m.Nick))
	case Back:
		c.disp.Println(fmt.Sprintf("* %s is back", m.Nick))
	case Restarted:
		c.disp.Println(fmt.Sprintf("* %s restarted", m.Nick))
	}
	if ev == Joined || ev == Restarted {
		// Tell the newcomer we are here without making it wait for a
		// heartbeat. Asynchronous: never send while holding mu.
		go c.send(Heartbeat, "")
	}
	var lost uint32
	deliver := false
	if p.Type == Msg {
		lost, deliver = m.Track.Msg(p.Seq)
	} else {
		lost = m.Track.Sent(p.Seq)
	}
	if lost > 0 {
		c.disp.Println(lossLine(lost, m.Nick))
	}
	if deliver {
		c.disp.Println(fmt.Sprintf("<%s> %s", m.Nick, sanitize(p.Text)))
	}
	if ev == LeftEvent {
		c.disp.Println(fmt.Sprintf("* %s left", m.Nick))
	}
}

func lossLine(n uint32, nick string) string {
	if n == 1 {
		return fmt.Sprintf("! 1 message from %s lost", nick)
	}
	return fmt.Sprintf("! %d messages from %s lost", n, nick)
}

// sanitize replaces control characters, so that no peer can move the
// cursor or recolor the terminal.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7F || (r >= 0x80 && r < 0xA0) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, s)
}

func (c *Chat) help() {
	for _, l := range []string{
		"* /who    members, when each was last heard from, messages lost",
		"* /stats  backend, device, MTU, messages sent, received and lost",
		"* /quit   say bye and leave the group (also Ctrl-C, Ctrl-D, end of input)",
		"* //text  sends a line that starts with /",
		fmt.Sprintf("* a line is one datagram: at most %d bytes here; longer ones are refused", c.MaxText()),
	} {
		c.disp.Println(l)
	}
}

func (c *Chat) who() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opt.now()
	ms := c.roster.Present()
	c.disp.Println(fmt.Sprintf("* %d in %s:", len(ms)+1, c.opt.Group.IP))
	c.disp.Println(fmt.Sprintf("*   %s (you)", c.opt.Nick))
	for _, m := range ms {
		c.disp.Println(fmt.Sprintf("*   %s: last seen %s ago, %d received, %d lost",
			m.Nick, now.Sub(m.LastSeen).Round(100*time.Millisecond), m.Track.Received, m.Track.Lost))
	}
}

// Counts is what /stats shows, summed over every session heard from.
type Counts struct {
	Sent, Received, Lost, Dups, Late, Injected, Refused uint64
}

// Counts returns the message counters.
func (c *Chat) Counts() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := Counts{Sent: c.sent - c.injected, Injected: c.injected, Refused: c.refused}
	for _, m := range c.roster.All() {
		k.Received += m.Track.Received
		k.Lost += m.Track.Lost
		k.Dups += m.Track.Dups
		k.Late += m.Track.Late
	}
	return k
}

func (c *Chat) stats() {
	b := c.conn.Backend()
	k := c.Counts()
	s := c.conn.Stats()
	var dropped uint64
	var why []string
	for _, k := range slices.Sorted(maps.Keys(s.Dropped)) {
		dropped += s.Dropped[k]
		why = append(why, fmt.Sprintf("%s %d", k, s.Dropped[k]))
	}
	drops := fmt.Sprint(dropped)
	if len(why) > 0 {
		drops += " (" + strings.Join(why, ", ") + ")"
	}
	c.mu.Lock()
	dg := c.datagrams
	c.mu.Unlock()
	lines := []string{
		fmt.Sprintf("* backend %s, device %s port %d (%s), group %s, MTU %d: lines up to %d bytes",
			b.Name, b.Device, b.Port, b.Netdev, c.opt.Group.IP, c.conn.MTU(), c.MaxText()),
		fmt.Sprintf("* messages: sent %d, received %d, lost %d, duplicates %d, late %d",
			k.Sent, k.Received, k.Lost, k.Dups, k.Late),
		fmt.Sprintf("* datagrams: sent %d, received %d, ignored %d; rdmanet sent %d, received %d, dropped %s, own copies not looped back %d",
			dg.sent, dg.received, dg.ignored, s.Sent, s.Received, drops, s.Loopback),
	}
	var notSent []string
	if k.Injected > 0 {
		notSent = append(notSent, fmt.Sprintf("%d dropped on purpose (-drop-every %d)", k.Injected, c.opt.DropEvery))
	}
	if k.Refused > 0 {
		notSent = append(notSent, fmt.Sprintf("%d too long", k.Refused))
	}
	if len(notSent) > 0 {
		lines = append(lines, "* not sent: "+strings.Join(notSent, ", "))
	}
	if c.rel != nil {
		r := c.rel.Stats()
		lines = append(lines, fmt.Sprintf("* reliable: NAKs sent %d, received %d; repairs %d (multicast %d); duplicates dropped %d; losses reported %d (%d messages); RTT %v",
			r.NAKsSent, r.NAKsReceived, r.RepairsMulticast+r.RepairsUnicast, r.RepairsMulticast, r.Duplicates, r.LossesReported, r.MessagesLost, r.RTT))
	}
	for _, l := range lines {
		c.disp.Println(l)
	}
}
