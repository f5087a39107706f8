package verbs

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeEvents is a channel's Next over a queue, failing with err once the
// queue is empty if err is set.
type fakeEvents struct {
	q   []Event
	err error
}

func (f *fakeEvents) next() (Event, bool, error) {
	if len(f.q) == 0 {
		return Event{}, false, f.err
	}
	ev := f.q[0]
	f.q = f.q[1:]
	return ev, true, nil
}

func TestEventCollector(t *testing.T) {
	ev := func(s int) Event { return Event{Type: EventMulticastError, Status: s} }
	f := &fakeEvents{}
	var c EventCollector
	c.Init(f.next)
	evs := make([]Event, 3)

	// The wait's polls fill the slice across calls, up to its length.
	n, err := c.WaitPoll(evs, func() (int, error) {
		f.q = []Event{ev(1)}
		n, err := c.Poll()
		require.NoError(t, err)
		require.Equal(t, 1, n, "first poll")
		f.q = []Event{ev(2), ev(3), ev(4)}
		return c.Poll()
	})
	require.NoError(t, err)
	require.Equal(t, 3, n, "events collected into a slice of 3")
	require.Equal(t, []Event{ev(1), ev(2), ev(3)}, evs)
	require.Equal(t, []Event{ev(4)}, f.q, "what did not fit stays queued")

	// A wait woken with nothing collects what is queued once more.
	n, err = c.WaitPoll(evs, func() (int, error) { return 0, nil })
	require.NoError(t, err)
	require.Equal(t, 1, n, "collected after a wake")
	require.Equal(t, ev(4), evs[0])

	// A wait that fails is not followed by a collect.
	f.q = []Event{ev(5)}
	errWait := errors.New("wait failed")
	n, err = c.WaitPoll(evs, func() (int, error) { return 0, errWait })
	require.ErrorIs(t, err, errWait)
	require.Zero(t, n)
	require.Len(t, f.q, 1, "collected after a failed wait")

	// Next's error ends the collect, with what was collected before it.
	f.err = errors.New("next failed")
	n, err = c.WaitPoll(evs, func() (int, error) { return c.Poll() })
	require.ErrorIs(t, err, f.err)
	require.Equal(t, 1, n)
	require.Equal(t, ev(5), evs[0])
}
