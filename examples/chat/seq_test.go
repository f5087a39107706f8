package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

type step struct {
	msg     bool // a msg, else a heartbeat saying "sent up to seq"
	seq     uint32
	lost    uint32
	deliver bool
}

func runSteps(t *testing.T, tr *Tracker, steps []step) {
	t.Helper()
	for i, s := range steps {
		if s.msg {
			lost, deliver := tr.Msg(s.seq)
			assert.Equal(t, s.lost, lost, "step %d: msg %d: lost", i, s.seq)
			assert.Equal(t, s.deliver, deliver, "step %d: msg %d: deliver", i, s.seq)
		} else {
			assert.Equal(t, s.lost, tr.Sent(s.seq), "step %d: sent %d: lost", i, s.seq)
		}
	}
}

func TestTrackerInOrder(t *testing.T) {
	var tr Tracker
	runSteps(t, &tr, []step{
		{seq: 0}, {msg: true, seq: 1, deliver: true}, {msg: true, seq: 2, deliver: true},
		{seq: 2}, {msg: true, seq: 3, deliver: true}, {seq: 3},
	})
	assert.Equal(t, Tracker{started: true, highest: 3, seen: tr.seen, Received: 3}, tr)
}

func TestTrackerGapAtNextMsg(t *testing.T) {
	var tr Tracker
	runSteps(t, &tr, []step{
		{msg: true, seq: 1, deliver: true},
		{msg: true, seq: 5, lost: 3, deliver: true},
		{msg: true, seq: 6, deliver: true},
	})
	assert.EqualValues(t, 3, tr.Lost)
	assert.EqualValues(t, 3, tr.Received)
}

func TestTrackerGapAtHeartbeat(t *testing.T) {
	var tr Tracker
	runSteps(t, &tr, []step{
		{seq: 0},
		{msg: true, seq: 1, deliver: true},
		{seq: 3, lost: 2}, // 2 and 3 never came
		{seq: 3},          // said again: nothing new
		{msg: true, seq: 4, deliver: true},
	})
	assert.EqualValues(t, 2, tr.Lost)
}

func TestTrackerDuplicatesSuppressed(t *testing.T) {
	var tr Tracker
	runSteps(t, &tr, []step{
		{msg: true, seq: 1, deliver: true},
		{msg: true, seq: 1},
		{msg: true, seq: 2, deliver: true},
		{msg: true, seq: 1},
		{msg: true, seq: 2},
	})
	assert.EqualValues(t, 3, tr.Dups)
	assert.EqualValues(t, 2, tr.Received)
	assert.Zero(t, tr.Lost)
}

func TestTrackerLateArrivalTakesLossBack(t *testing.T) {
	var tr Tracker
	runSteps(t, &tr, []step{
		{msg: true, seq: 1, deliver: true},
		{msg: true, seq: 3, lost: 1, deliver: true},
		{msg: true, seq: 2, deliver: true}, // late, not lost after all
		{msg: true, seq: 2},                // and now a duplicate
	})
	assert.Zero(t, tr.Lost)
	assert.EqualValues(t, 1, tr.Late)
	assert.EqualValues(t, 1, tr.Dups)
}

func TestTrackerJoinedLate(t *testing.T) {
	// What was sent before we heard of the sender is not lost to us.
	var tr Tracker
	runSteps(t, &tr, []step{{msg: true, seq: 40, deliver: true}, {msg: true, seq: 41, deliver: true}})
	assert.Zero(t, tr.Lost)
	var hb Tracker
	runSteps(t, &hb, []step{{seq: 40}, {msg: true, seq: 41, deliver: true}, {msg: true, seq: 39}})
	assert.Zero(t, hb.Lost)
}

func TestTrackerBigGapAndOldDuplicates(t *testing.T) {
	var tr Tracker
	runSteps(t, &tr, []step{
		{msg: true, seq: 1, deliver: true},
		{msg: true, seq: 1001, lost: 999, deliver: true},
		{msg: true, seq: 1001 - window}, // out of the window: cannot tell, dropped
		{msg: true, seq: 1000, deliver: true},
	})
	assert.EqualValues(t, 998, tr.Lost)
}
