package reliable

import (
	"fmt"
	"time"
)

// FlowControl says whether a sender waits for its receivers.
type FlowControl int

const (
	// FlowMax (the default): a sender never waits. A receiver that falls
	// a window behind loses what left the window, and is told so with a
	// *LossError.
	FlowMax FlowControl = iota
	// FlowMin: receivers report their position (status messages) and a
	// write waits, bounded by the write deadline, while the slowest live
	// receiver is a window behind. A receiver silent for ReceiverTimeout
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
// use: the defaults are in the comments.
type Config struct {
	// MaxMessage is the longest message a write may carry (default
	// 64 KiB, like UDP). Messages longer than a datagram are cut into
	// fragments of MTU()-28 bytes and reassembled by receivers.
	MaxMessage int
	// Window is how many datagrams a sender keeps for repair (default
	// 4096). It bounds how far a receiver may fall behind before losing
	// messages, and, with FlowMin, how far a sender may run ahead.
	Window int
	// RecvWindow is how many datagrams a receiver buffers per sender,
	// received but not yet read, or waiting behind a gap (default 1024).
	// Datagrams beyond it are dropped and asked for again later.
	RecvWindow int
	// MaxSenders bounds the senders a receiver tracks at once (default
	// 64); datagrams from more are dropped and counted.
	MaxSenders int

	// NAKDelay, when set, is the fixed upper bound of the random delay
	// before a receiver asks for a gap. By default the bound follows the
	// smoothed round trip to the sender (RFC 5401's back-off, one RTT),
	// from 5 µs to 10 ms, starting from InitialRTT.
	NAKDelay time.Duration
	// InitialRTT seeds the round-trip estimate before the first repair is
	// timed (default 50 µs).
	InitialRTT time.Duration
	// RepairLinger: after a datagram is repaired, no NAK for it is
	// answered for this long (default 20 µs). Past it, a NAK sent before
	// its receiver heard the repair (the transmission number it echoes
	// is older) is not answered either: the repair is on its way to
	// everyone who missed it. With UnicastRepair, NAKs are held for two
	// of the asking receiver's round trips, at least RepairLinger.
	RepairLinger time.Duration
	// UnicastRepair sends repairs to the receiver that asked instead of
	// to the group. The default, multicast repair, serves every receiver
	// that missed the datagram at once.
	UnicastRepair bool

	// HeartbeatInterval is how soon an idle sender announces its position,
	// so receivers find tail loss (default 100 µs), doubling while idle up
	// to HeartbeatMax (default 100 ms).
	HeartbeatInterval time.Duration
	HeartbeatMax      time.Duration
	// SenderTimeout: a sender not heard from for this long is forgotten
	// (default 1 s).
	SenderTimeout time.Duration

	// FlowControl is FlowMax (default) or FlowMin.
	FlowControl FlowControl
	// StatusInterval is how often a receiver reports its position to each
	// FlowMin sender (default 1 ms), and also whenever its position, or
	// its room (read position plus RecvWindow), moved on by a quarter of
	// RecvWindow. To a FlowMax sender, which never waits for it, it
	// reports when it first hears the sender, when asked at the sender's
	// Close, and otherwise every ReceiverTimeout/4 (at least
	// StatusInterval), to stay known.
	StatusInterval time.Duration
	// ReceiverTimeout: a receiver whose status is not heard for this long
	// no longer holds back a FlowMin sender or Close (default 500 ms).
	ReceiverTimeout time.Duration

	// Linger bounds how long Close keeps serving repairs, until every
	// live receiver reports it has everything (default 50 ms; negative:
	// do not linger).
	Linger time.Duration
	// FromWindowStart makes a receiver start a newly heard sender at the
	// oldest message the sender still holds, instead of at its current
	// position.
	FromWindowStart bool
}

func (c *Config) setDefaults(mtu int) error {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.MaxMessage == 0 {
		c.MaxMessage = 64 << 10
	}
	if c.Window == 0 {
		c.Window = 4096
	}
	if c.RecvWindow == 0 {
		c.RecvWindow = 1024
	}
	if c.MaxSenders == 0 {
		c.MaxSenders = 64
	}
	def(&c.InitialRTT, 50*time.Microsecond)
	def(&c.RepairLinger, 20*time.Microsecond)
	def(&c.HeartbeatInterval, 100*time.Microsecond)
	def(&c.HeartbeatMax, 100*time.Millisecond)
	def(&c.SenderTimeout, time.Second)
	def(&c.StatusInterval, time.Millisecond)
	def(&c.ReceiverTimeout, 500*time.Millisecond)
	def(&c.Linger, 50*time.Millisecond)
	if mtu <= headerLen {
		return fmt.Errorf("reliable: MTU %d leaves no room after the %d-byte header", mtu, headerLen)
	}
	frags := (c.MaxMessage + mtu - headerLen - 1) / (mtu - headerLen)
	switch {
	case c.MaxMessage < 0:
		return fmt.Errorf("reliable: MaxMessage %d < 0", c.MaxMessage)
	case frags > 0xffff:
		return fmt.Errorf("reliable: MaxMessage %d needs %d fragments, more than 65535", c.MaxMessage, frags)
	case c.Window < 2*frags || c.Window < 16:
		return fmt.Errorf("reliable: Window %d must hold two largest messages (%d datagrams) and at least 16", c.Window, 2*frags)
	case c.RecvWindow < 2*frags || c.RecvWindow < 16:
		return fmt.Errorf("reliable: RecvWindow %d must hold two largest messages (%d datagrams) and at least 16", c.RecvWindow, 2*frags)
	case c.MaxSenders < 1:
		return fmt.Errorf("reliable: MaxSenders %d < 1", c.MaxSenders)
	case c.FlowControl != FlowMax && c.FlowControl != FlowMin:
		return fmt.Errorf("reliable: unknown %v", c.FlowControl)
	}
	return nil
}
