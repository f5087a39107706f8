package main

import (
	"cmp"
	"slices"
	"time"
)

// Member is one chat process as this one sees it. A process is a session:
// a restarted chat is a new Member, even under the same nick.
type Member struct {
	Session  uint64
	Nick     string
	From     string // the sender's rdmanet address, GID/QPN
	First    time.Time
	LastSeen time.Time
	Interval time.Duration // its heartbeat interval
	State    State
	Track    Tracker
}

// State is where a Member stands.
type State uint8

// Member states.
const (
	Present State = iota
	Left          // said bye: anything more from it is a stray duplicate
	Gone          // timed out or replaced by a restart: it may come back
)

// Timeout is how long a member may stay silent: three heartbeats and a
// half, so one or two lost heartbeats do not drop it.
func (m *Member) Timeout() time.Duration { return 3*m.Interval + m.Interval/2 }

// Event is what a datagram changed in the roster.
type Event uint8

// Roster events.
const (
	NoEvent   Event = iota
	Joined          // a hello from a new session
	Here            // first heard of through a msg or heartbeat: it was there before us, or its hello was lost
	Back            // heard from again after it timed out
	Restarted       // a hello from a new session under the nick of a present member
	LeftEvent       // a bye
	Stray           // from a session that said bye: ignore
)

// defaultInterval is assumed for a sender that announces none.
const defaultInterval = 2 * time.Second

// forget is how long members that left or timed out are remembered (to
// ignore their stray datagrams, and to count losses if they come back).
const forget = 10 * time.Minute

// Roster is the group's membership as seen from here. It is not safe for
// concurrent use: the chat holds its lock.
type Roster struct {
	members map[uint64]*Member
}

// NewRoster returns an empty roster.
func NewRoster() *Roster { return &Roster{members: map[uint64]*Member{}} }

// Observe records a datagram from a session received at now, and returns
// its member and what changed. replaced is the member a restart took the
// place of, when ev is Restarted.
func (r *Roster) Observe(p *Packet, from string, now time.Time) (m *Member, ev Event, replaced *Member) {
	interval := time.Duration(p.Interval) * time.Millisecond
	if interval <= 0 {
		interval = defaultInterval
	}
	m = r.members[p.Session]
	switch {
	case m == nil:
		if p.Type == Bye {
			// A bye from someone never heard of: nothing to announce,
			// but remember it so its stray datagrams stay quiet.
			m = &Member{Session: p.Session, Nick: p.Nick, From: from, First: now, LastSeen: now, State: Left}
			r.members[p.Session] = m
			return m, Stray, nil
		}
		m = &Member{Session: p.Session, Nick: p.Nick, From: from, First: now, State: Present}
		r.members[p.Session] = m
		ev = Here
		if p.Type == Hello {
			ev = Joined
			if old := r.present(p.Nick, p.Session); old != nil {
				old.State = Gone
				ev, replaced = Restarted, old
			}
		}
	case m.State == Left:
		return m, Stray, nil
	case m.State == Gone:
		m.State = Present
		ev = Back
	}
	m.LastSeen, m.Interval = now, interval
	if p.Type == Bye {
		m.State = Left
		ev = LeftEvent
	}
	return m, ev, replaced
}

// present returns a present member with the nick, other than session.
func (r *Roster) present(nick string, session uint64) *Member {
	for _, m := range r.members {
		if m.State == Present && m.Nick == nick && m.Session != session {
			return m
		}
	}
	return nil
}

// Expire marks present members silent for longer than their timeout as
// Gone and returns them, and forgets long-departed ones.
func (r *Roster) Expire(now time.Time) []*Member {
	var out []*Member
	for s, m := range r.members {
		switch {
		case m.State == Present && now.Sub(m.LastSeen) > m.Timeout():
			m.State = Gone
			out = append(out, m)
		case m.State != Present && now.Sub(m.LastSeen) > forget:
			delete(r.members, s)
		}
	}
	sortMembers(out)
	return out
}

// Present returns the present members, by nick.
func (r *Roster) Present() []*Member {
	var out []*Member
	for _, m := range r.members {
		if m.State == Present {
			out = append(out, m)
		}
	}
	sortMembers(out)
	return out
}

// All returns every member remembered, present or not.
func (r *Roster) All() []*Member {
	out := make([]*Member, 0, len(r.members))
	for _, m := range r.members {
		out = append(out, m)
	}
	sortMembers(out)
	return out
}

func sortMembers(ms []*Member) {
	slices.SortFunc(ms, func(a, b *Member) int {
		return cmp.Or(cmp.Compare(a.Nick, b.Nick), a.First.Compare(b.First), cmp.Compare(a.Session, b.Session))
	})
}
