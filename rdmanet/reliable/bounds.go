package reliable

import (
	"fmt"
	"math"
	"math/bits"
	"time"
)

// The bounds of Config that do not come from one field's row.
const (
	maxWindow         = 1 << 20  // Window and RecvWindow, in datagrams
	maxSenders        = 1 << 16  // MaxSenders
	maxFragments      = 0xffff   // fragments of one message (a 16-bit field on the wire)
	maxWindowBytes    = 1 << 30  // the sender's window; one sender's receive window
	maxRecvTotalBytes = 16 << 30 // MaxSenders receive windows together
)

// bound is one Config field's row: its default, its range, and where the
// range depends on other fields or the MTU, the function that narrows it.
// setDefaults runs the rows in order, so a row may rely on the fields of
// the rows above it being valid. A new field is one more row in
// configBounds.
type bound struct {
	field string
	get   func(*Config) int64
	set   func(*Config, int64)
	def   int64 // taken by a zero value; a zero default means 0 is valid (off)
	// min and max are the static range; math.MinInt64 as min: any
	// negative value means something (Linger).
	min, max int64
	// narrow, when set, returns a tighter floor and ceiling (0: none)
	// and why, for the conn's MTU.
	narrow func(c *Config, mtu int) (lo, hi int64, why string)
	format func(int64) string
}

// intBound and durBound make a row for an int-like or a time.Duration
// field.
func intBound[T ~int](field string, p func(*Config) *T, def, min, max int64) bound {
	return bound{
		field:  field,
		get:    func(c *Config) int64 { return int64(*p(c)) },
		set:    func(c *Config, v int64) { *p(c) = T(v) },
		def:    def,
		min:    min,
		max:    max,
		format: func(v int64) string { return fmt.Sprint(T(v)) },
	}
}

func durBound(field string, p func(*Config) *time.Duration, def, min, max time.Duration) bound {
	return bound{
		field:  field,
		get:    func(c *Config) int64 { return int64(*p(c)) },
		set:    func(c *Config, v int64) { *p(c) = time.Duration(v) },
		def:    int64(def),
		min:    int64(min),
		max:    int64(max),
		format: func(v int64) string { return time.Duration(v).String() },
	}
}

func (b bound) narrowed(f func(c *Config, mtu int) (lo, hi int64, why string)) bound {
	b.narrow = f
	return b
}

// fragments is how many datagrams a message of n bytes takes at mtu, with
// no overflow.
func fragments(n, mtu int) int64 {
	frag := int64(mtu - headerLen)
	return (int64(n) + frag - 1) / frag
}

// twoMessages is the floor of Window and RecvWindow: two largest
// messages (MaxMessage is valid by then).
func twoMessages(c *Config, mtu int) (int64, int64, string) {
	f := fragments(c.MaxMessage, mtu)
	return 2 * f, 0, fmt.Sprintf("two largest messages: MaxMessage %d is %d datagrams at MTU %d", c.MaxMessage, f, mtu)
}

var configBounds = []bound{
	intBound("MaxMessage", func(c *Config) *int { return &c.MaxMessage }, 64<<10, 1, math.MaxInt64).
		narrowed(func(c *Config, mtu int) (int64, int64, string) {
			hi := int64(maxFragments) * int64(mtu-headerLen)
			return 0, hi, fmt.Sprintf("%d fragments of %d bytes at MTU %d", maxFragments, mtu-headerLen, mtu)
		}),
	intBound("Window", func(c *Config) *int { return &c.Window }, 4096, 16, maxWindow).narrowed(twoMessages),
	intBound("RecvWindow", func(c *Config) *int { return &c.RecvWindow }, 1024, 16, maxWindow).narrowed(twoMessages),
	intBound("MaxSenders", func(c *Config) *int { return &c.MaxSenders }, 64, 1, maxSenders),
	durBound("NAKDelay", func(c *Config) *time.Duration { return &c.NAKDelay }, 0, time.Microsecond, time.Second),
	durBound("InitialRTT", func(c *Config) *time.Duration { return &c.InitialRTT }, 200*time.Microsecond, time.Microsecond, time.Second),
	durBound("RepairLinger", func(c *Config) *time.Duration { return &c.RepairLinger }, 20*time.Microsecond, time.Microsecond, time.Second),
	durBound("HeartbeatInterval", func(c *Config) *time.Duration { return &c.HeartbeatInterval }, 100*time.Microsecond, 10*time.Microsecond, time.Second),
	durBound("HeartbeatMax", func(c *Config) *time.Duration { return &c.HeartbeatMax }, 100*time.Millisecond, time.Millisecond, time.Minute).
		narrowed(func(c *Config, _ int) (int64, int64, string) {
			return int64(c.HeartbeatInterval), 0, "HeartbeatInterval " + c.HeartbeatInterval.String()
		}),
	durBound("SenderTimeout", func(c *Config) *time.Duration { return &c.SenderTimeout }, time.Second, time.Millisecond, time.Hour),
	intBound("FlowControl", func(c *Config) *FlowControl { return &c.FlowControl }, 0, int64(FlowMax), int64(FlowMin)),
	durBound("StatusInterval", func(c *Config) *time.Duration { return &c.StatusInterval }, time.Millisecond, 100*time.Microsecond, time.Hour),
	durBound("ReceiverTimeout", func(c *Config) *time.Duration { return &c.ReceiverTimeout }, 500*time.Millisecond, time.Millisecond, time.Hour),
	durBound("Linger", func(c *Config) *time.Duration { return &c.Linger }, 50*time.Millisecond, math.MinInt64, time.Minute),
}

// applyBounds sets the defaults, checks every row of configBounds and
// then the memory the windows take, all before anything is allocated.
func (c *Config) applyBounds(mtu int) error {
	if mtu <= headerLen {
		return fmt.Errorf("reliable: MTU %d leaves no room after the %d-byte header", mtu, headerLen)
	}
	for _, b := range configBounds {
		if err := b.check(c, mtu); err != nil {
			return err
		}
	}
	return c.checkMemory(mtu)
}

// check defaults and checks one field.
func (b bound) check(c *Config, mtu int) error {
	v := b.get(c)
	if v == 0 {
		if b.def == 0 {
			return nil
		}
		v = b.def
		b.set(c, v)
	}
	dflt := ""
	if b.def != 0 {
		dflt = ", " + b.format(b.def)
	}
	if v < 0 && b.min >= 0 {
		return fmt.Errorf("reliable: Config.%s %s is negative (0 takes the default%s)", b.field, b.format(v), dflt)
	}
	lo, hi, why := b.min, b.max, ""
	if b.narrow != nil {
		nlo, nhi, nwhy := b.narrow(c, mtu)
		if nlo > lo {
			lo, why = nlo, nwhy
		}
		if nhi != 0 && nhi < hi {
			hi, why = nhi, nwhy
		}
	}
	if why != "" {
		why = " (" + why + ")"
	}
	switch {
	case v < lo:
		return fmt.Errorf("reliable: Config.%s %s is under the floor %s%s", b.field, b.format(v), b.format(lo), why)
	case v > hi:
		return fmt.Errorf("reliable: Config.%s %s is over the limit %s%s", b.field, b.format(v), b.format(hi), why)
	}
	return nil
}

// checkMemory bounds what the windows take: the sender's Window slots,
// allocated by Listen, and RecvWindow slots for each of up to MaxSenders
// senders, allocated as they are heard (mtu is the room for header and
// payload; a keyed conn's slot also holds the trailer). The fields are
// in range, so no product overflows 64 bits, but it is checked as if it
// could.
func (c *Config) checkMemory(mtu int) error {
	mtu += c.trailer() // the slots hold the whole datagram: mtu is its payload room
	stride := uint64(slotStride(mtu))
	mul := func(a, b uint64) uint64 {
		hi, lo := bits.Mul64(a, b)
		if hi != 0 {
			return math.MaxUint64
		}
		return lo
	}
	if n := mul(uint64(c.Window), stride); n > maxWindowBytes {
		return fmt.Errorf("reliable: Config.Window %d takes %d bytes (%d-byte slots at MTU %d), over the limit %d (1 GiB)", c.Window, n, stride, mtu, maxWindowBytes)
	}
	one := mul(uint64(c.RecvWindow), stride)
	if one > maxWindowBytes {
		return fmt.Errorf("reliable: Config.RecvWindow %d takes %d bytes a sender (%d-byte slots at MTU %d), over the limit %d (1 GiB)", c.RecvWindow, one, stride, mtu, maxWindowBytes)
	}
	if n := mul(one, uint64(c.MaxSenders)); n > maxRecvTotalBytes {
		return fmt.Errorf("reliable: Config.RecvWindow %d for Config.MaxSenders %d senders takes up to %d bytes (%d-byte slots at MTU %d), over the limit %d (16 GiB)", c.RecvWindow, c.MaxSenders, n, stride, mtu, int64(maxRecvTotalBytes))
	}
	return nil
}
