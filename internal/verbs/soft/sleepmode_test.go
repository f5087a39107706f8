//go:build linux

package soft

import "testing"

// The sleep mode's transitions: narrow until a unicast datagram, then
// wideWaits wide sleeps, a datagram meanwhile refilling them, then narrow.
func TestSleepModeTransitions(t *testing.T) {
	var m sleepMode
	if m.narrow() {
		t.Fatal("a fresh mode is arranged narrow; want wide (the sets start wide)")
	}
	step := func(want uint32, what string) {
		t.Helper()
		got := m.next()
		if got != want {
			t.Fatalf("%s: next() = %d, want %d", what, got, want)
		}
		m.set(got)
	}
	step(modeNarrow, "first sleep, no unicast yet")
	step(modeNarrow, "still no unicast")
	m.heard()
	for range wideWaits {
		step(modeWide, "a sleep after a unicast datagram")
	}
	step(modeNarrow, "wideWaits sleeps with no unicast")
	m.heard()
	for range 10 {
		step(modeWide, "a sleep after a unicast datagram")
	}
	m.heard() // another one: the countdown starts again
	for range wideWaits {
		step(modeWide, "a sleep after the refill")
	}
	step(modeNarrow, "wideWaits sleeps with no unicast")
	if !m.narrow() {
		t.Fatal("set(modeNarrow) not recorded")
	}
}
