package reliable

import (
	"bytes"
	"fmt"
	"math"
	"time"
)

// FlowControl says whether a sender waits for its receivers.
type FlowControl int

const (
	// FlowMax, the default, never makes a sender wait. A receiver that
	// falls a window behind loses what left the window, and is told so
	// with a *LossError.
	FlowMax FlowControl = iota
	// FlowMin makes a write wait, bounded by the write deadline, while the
	// slowest live receiver is a window behind; receivers report their
	// position in status messages. A receiver silent for ReceiverTimeout
	// stops holding the sender back.
	FlowMin
)

func (f FlowControl) String() string {
	switch f {
	case FlowMax:
		return "max"
	case FlowMin:
		return "min"
	}
	return fmt.Sprintf("FlowControl(%d)", int(f))
}

// Config holds the options of a reliable conn. The zero value is ready to
// use: the defaults are in the comments. A zero field takes its default;
// Listen and New refuse a value outside the bounds each comment gives
// (negative ones too, except for Linger) with an error that names the
// field, its value and the bound, and refuse a config whose windows would
// take more memory than these bounds: the sender's window at most 1 GiB,
// one sender's receive window at most 1 GiB, and the receive windows of
// MaxSenders senders at most 16 GiB together (a slot of either window is
// MTU() rounded up to 64, plus 64 bytes: 1088 bytes at MTU 1024, 4160 at
// 4096). docs/errors-and-limits.md has the table.
type Config struct {
	// MaxMessage is the longest message a write may carry (default
	// 64 KiB, like UDP). Messages longer than a datagram are cut into
	// fragments of MTU()-28 bytes and reassembled by receivers. At most
	// 65535 fragments (65535 × (MTU()-28) bytes: 63 MiB at MTU 1024).
	MaxMessage int
	// Window is how many datagrams a sender keeps for repair (default
	// 4096). It bounds how far a receiver may fall behind before losing
	// messages, and, with FlowMin, how far a sender may run ahead. From
	// 16, and two largest messages (2 × MaxMessage/(MTU()-28), rounded
	// up), to 1048576 (1 << 20), and at most 1 GiB of slots.
	Window int
	// RecvWindow is how many datagrams a receiver buffers per sender,
	// received but not yet read, or waiting behind a gap (default 1024).
	// Datagrams beyond it are dropped and asked for again later. Bounds
	// as Window's; and MaxSenders × RecvWindow slots at most 16 GiB.
	RecvWindow int
	// MaxSenders bounds the senders a receiver tracks at once (default
	// 64); datagrams from more are dropped and counted. From 1 to 65536.
	MaxSenders int

	// NAKDelay, when set, is the fixed upper bound of the random delay
	// before a receiver asks for a gap. By default the bound is
	// 3·(ln(N)+1)·srtt (RFC 5401's back-off), N the group size the sender
	// advertises and srtt the smoothed round trip to it, starting from
	// InitialRTT, at most 1 s; a lone receiver asks at once. When set,
	// from 1 µs to 1 s.
	NAKDelay time.Duration
	// InitialRTT seeds the round-trip estimate before the first repair is
	// timed (default 200 µs): a receiver that has measured none backs off
	// from it, and never from less. A receiver learns its round trip only
	// from the losses it takes part in: with loss spread thin over a large
	// group and a fabric more than twice as slow as the default, set it to
	// the fabric's round trip (see the package doc's simulation). A
	// larger value costs only a slower first repair. From 1 µs to 1 s.
	InitialRTT time.Duration
	// RepairLinger is how long, after a datagram is repaired, NAKs for it
	// go unanswered (default 20 µs). Past it, a NAK sent before
	// its receiver heard the repair (the transmission number it echoes
	// is older) is not answered either: the repair is on its way to
	// everyone who missed it. With UnicastRepair, NAKs are held for two
	// of the asking receiver's round trips, at least RepairLinger. From
	// 1 µs to 1 s.
	RepairLinger time.Duration
	// UnicastRepair sends repairs to the receiver that asked instead of
	// to the group. The default, multicast repair, serves every receiver
	// that missed the datagram at once.
	UnicastRepair bool

	// HeartbeatInterval is how soon an idle sender announces its position,
	// so receivers find tail loss (default 100 µs), doubling while idle up
	// to HeartbeatMax (default 100 ms). HeartbeatInterval is from 10 µs to
	// 1 s; HeartbeatMax from 1 ms, and from HeartbeatInterval, to 1 min:
	// an idle sender sends at most 1000 heartbeats a second.
	HeartbeatInterval time.Duration
	HeartbeatMax      time.Duration
	// SenderTimeout is how long a sender may go unheard before it is
	// forgotten (default 1 s). From 1 ms to 1 h; keep it well over the senders'
	// HeartbeatMax (an idle sender is heard only by its heartbeats).
	SenderTimeout time.Duration

	// FlowControl is FlowMax (default) or FlowMin.
	FlowControl FlowControl
	// StatusInterval bounds how often a receiver answers a FlowMin
	// sender's heartbeats while its write waits for room (default 1 ms);
	// it also reports whenever its position, or its room (read position
	// plus RecvWindow), moved on by a quarter of RecvWindow, and every
	// ReceiverTimeout/4. To a FlowMax sender, which never waits for it,
	// it reports when it first hears the sender, when asked at the
	// sender's Close, and otherwise once a ReceiverTimeout (at least
	// StatusInterval). From 100 µs to 1 h.
	StatusInterval time.Duration
	// ReceiverTimeout is how long a receiver's status may go unheard
	// before it stops holding back a FlowMin sender or Close (default
	// 500 ms).
	// From 1 ms to 1 h; keep it well over the receivers' StatusInterval.
	ReceiverTimeout time.Duration

	// Linger bounds how long Close keeps serving repairs, until every
	// live receiver reports it has everything (default 50 ms; negative:
	// do not linger). At most 1 min.
	Linger time.Duration
	// FromWindowStart makes a receiver start a newly heard sender at the
	// oldest message the sender still holds, instead of at its current
	// position (or, in the sender's first second, at its first message:
	// see Membership in the package doc).
	FromWindowStart bool

	// RepairInterval is the least time between two resends of one
	// datagram, whatever the NAKs that ask for it echo (default 250 µs).
	// A receiver that lost the repair asks again after its retry timeout
	// and is answered once the interval has passed.
	RepairInterval time.Duration
	// RepairShare bounds repair traffic to a share of what the sender
	// sends (default 0.5): each byte of a first send earns RepairShare
	// bytes of repair credit, up to a burst of 256 KiB, which also
	// refills over a second (so an idle sender still repairs its last
	// datagrams); a repair the credit does not cover is not sent now
	// (Stats.RepairsRateLimited) and its receiver asks again later. The
	// default serves independent 1% loss at 64 receivers (a multicast
	// repair for each datagram any of them lost: 47% of the datagrams).
	// A negative RepairShare sets no bound.
	RepairShare float64

	// Key, when set, authenticates the group (16 to 64 bytes, shared by
	// every member; see the package docs, Authentication): every
	// datagram carries a counter and an HMAC-SHA-256 tag under the key
	// (24 bytes, so a datagram carries MTU()-52 bytes of a message), and
	// datagrams without a valid tag, or replayed, are dropped and
	// counted (Stats.Unauthenticated, Stats.Replayed). Conns with
	// different keys, or one with a key and one without, do not hear
	// each other.
	Key []byte
}

// guardDefaults sets and checks the repair bounds and the key.
func (c *Config) guardDefaults() error {
	switch {
	case c.RepairInterval < 0:
		return fmt.Errorf("reliable: Config.RepairInterval %v is negative (0 takes the default, 250µs)", c.RepairInterval)
	case c.RepairInterval > time.Second:
		return fmt.Errorf("reliable: Config.RepairInterval %v is over the limit 1s", c.RepairInterval)
	case math.IsNaN(c.RepairShare) || math.IsInf(c.RepairShare, 0):
		return fmt.Errorf("reliable: Config.RepairShare %v is not a finite number (0 takes the default, 0.5; negative: no bound)", c.RepairShare)
	case c.RepairShare > 100:
		return fmt.Errorf("reliable: Config.RepairShare %v is over the limit 100", c.RepairShare)
	}
	if err := checkKey(c.Key); err != nil {
		return err
	}
	c.Key = bytes.Clone(c.Key) // the caller's may change
	if c.RepairInterval == 0 {
		c.RepairInterval = 250 * time.Microsecond
	}
	if c.RepairShare == 0 {
		c.RepairShare = 0.5
	}
	return nil
}

// setDefaults puts the defaults into c's zero fields and checks every
// field against its bounds (bounds.go) for a conn whose datagrams are mtu
// bytes.
func (c *Config) setDefaults(mtu int) error {
	return c.applyBounds(mtu)
}
