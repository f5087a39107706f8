package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func pkt(typ Type, session uint64, nick string) *Packet {
	return &Packet{Type: typ, Session: session, Nick: nick, Interval: 100}
}

func nicks(ms []*Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Nick)
	}
	return out
}

func TestRosterLifecycle(t *testing.T) {
	r := NewRoster()
	t0 := time.Unix(1000, 0)
	_, ev, _ := r.Observe(pkt(Hello, 1, "bob"), "b", t0)
	assert.Equal(t, Joined, ev)
	_, ev, _ = r.Observe(pkt(Heartbeat, 2, "alice"), "a", t0)
	assert.Equal(t, Here, ev)
	_, ev, _ = r.Observe(pkt(Heartbeat, 1, "bob"), "b", t0.Add(50*time.Millisecond))
	assert.Equal(t, NoEvent, ev)
	assert.Equal(t, []string{"alice", "bob"}, nicks(r.Present()))

	// alice falls silent: gone after 3.5 intervals, not before.
	assert.Empty(t, r.Expire(t0.Add(340*time.Millisecond)))
	r.Observe(pkt(Heartbeat, 1, "bob"), "b", t0.Add(300*time.Millisecond))
	gone := r.Expire(t0.Add(360 * time.Millisecond))
	assert.Equal(t, []string{"alice"}, nicks(gone))
	assert.Equal(t, []string{"bob"}, nicks(r.Present()))
	_, ev, _ = r.Observe(pkt(Heartbeat, 2, "alice"), "a", t0.Add(time.Second))
	assert.Equal(t, Back, ev)

	// bob says bye; a stray duplicate of it changes nothing.
	_, ev, _ = r.Observe(pkt(Bye, 1, "bob"), "b", t0.Add(time.Second))
	assert.Equal(t, LeftEvent, ev)
	_, ev, _ = r.Observe(pkt(Bye, 1, "bob"), "b", t0.Add(time.Second))
	assert.Equal(t, Stray, ev)
	_, ev, _ = r.Observe(pkt(Heartbeat, 1, "bob"), "b", t0.Add(time.Second))
	assert.Equal(t, Stray, ev)
	assert.Equal(t, []string{"alice"}, nicks(r.Present()))

	// Long after, departed members are forgotten.
	r.Observe(pkt(Heartbeat, 2, "alice"), "a", t0.Add(forget+2*time.Second))
	r.Expire(t0.Add(forget + 2*time.Second))
	assert.Len(t, r.All(), 1)
}

func TestRosterRestart(t *testing.T) {
	r := NewRoster()
	t0 := time.Unix(1000, 0)
	old, _, _ := r.Observe(pkt(Hello, 1, "bob"), "b1", t0)
	old.Track.Msg(5)
	m, ev, replaced := r.Observe(pkt(Hello, 7, "bob"), "b2", t0.Add(time.Second))
	assert.Equal(t, Restarted, ev)
	require.Same(t, old, replaced)
	assert.Equal(t, Gone, old.State)
	assert.Equal(t, []*Member{m}, r.Present())
	// The new session counts from scratch: msg 1 is not a duplicate.
	lost, deliver := m.Track.Msg(1)
	assert.True(t, deliver)
	assert.Zero(t, lost)
}

func TestRosterByeFromStranger(t *testing.T) {
	r := NewRoster()
	_, ev, _ := r.Observe(pkt(Bye, 9, "eve"), "e", time.Unix(1, 0))
	assert.Equal(t, Stray, ev)
	assert.Empty(t, r.Present())
}
