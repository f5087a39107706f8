//go:build linux

package soft_test

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// The receive CQ's waiter: WaitPoll returns what arrives, a deadline
// ends it with os.ErrDeadlineExceeded (also one set while it is blocked),
// Close with net.ErrClosed, and a second waiter is refused.
func TestRecvWaiterContract(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{})
	m, _ := a.join("239.201.12.1", false)
	_, ah := s.join("239.201.12.1", true)
	a.postRecvs(0, 8)
	w, err := a.qp.RecvCQ().NewWaiter(0)
	require.NoError(t, err)
	_, err = a.qp.RecvCQ().NewWaiter(0)
	assert.Error(t, err, "a second waiter on one CQ")
	var wcs [4]verbs.WC

	got := make(chan error, 1)
	go func() {
		n, err := w.WaitPoll(wcs[:])
		if err == nil && n != 1 {
			t.Errorf("WaitPoll: got %d completions, want 1", n)
		}
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	s.send(ah, m.RemoteQPN, []byte("x"), 0, 0)
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("a datagram did not wake WaitPoll")
	}
	assert.Equal(t, []byte("x"), a.buf(wcs[0])[verbs.GRHSize:])

	require.NoError(t, w.SetDeadline(time.Now().Add(-time.Second)))
	_, err = w.WaitPoll(wcs[:])
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, w.SetDeadline(time.Time{}))

	go func() { _, err := w.WaitPoll(wcs[:]); got <- err }()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, w.SetDeadline(time.Now().Add(10*time.Millisecond)))
	select {
	case err := <-got:
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	case <-time.After(5 * time.Second):
		t.Fatal("a deadline set while WaitPoll was blocked did not end it")
	}
	require.NoError(t, w.SetDeadline(time.Time{}))

	go func() { _, err := w.WaitPoll(wcs[:]); got <- err }()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, w.Close())
	select {
	case err := <-got:
		assert.ErrorIs(t, err, net.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock WaitPoll")
	}
	_, err = w.WaitPoll(wcs[:])
	assert.ErrorIs(t, err, net.ErrClosed, "WaitPoll after Close")
	require.NoError(t, w.Close(), "a second Close")
}

// The waiters take the CQs' fds over: a QP with both waiters holds no
// more fds than one without, and its destroy closes them all, with or
// without the waiters closed first.
func TestWaitersTakeFdsOver(t *testing.T) {
	p := soft.Provider{}
	open := func(waiters, closeFirst bool) (int, func()) {
		before := countFds(t)
		id, err := p.Bind(verbs.BindConfig{})
		require.NoError(t, err)
		qp, err := id.CreateQP(verbs.QPConfig{})
		require.NoError(t, err)
		_, err = id.Join(context.Background(), verbs.Group{IP: net.IPv4(239, 201, 12, 2)}, verbs.JoinOptions{})
		require.NoError(t, err)
		var ws []verbs.CQWaiter
		if waiters {
			for _, cq := range []verbs.CQ{qp.SendCQ(), qp.RecvCQ()} {
				w, err := cq.NewWaiter(0)
				require.NoError(t, err)
				ws = append(ws, w)
			}
		}
		held := countFds(t) - before
		return held, func() {
			if closeFirst {
				for _, w := range ws {
					require.NoError(t, w.Close())
				}
			}
			require.NoError(t, id.Close())
		}
	}
	_, done := open(false, false) // what the process keeps (a QPN block, a netlink subscription) is no QP's
	done()
	before := countFds(t)
	bare, done := open(false, false)
	done()
	with, done := open(true, false)
	assert.Equal(t, bare, with, "fds of a QP without waiters and with both")
	done()
	_, done = open(true, true)
	done()
	assert.Equal(t, before, countFds(t), "fds left after destroy")
}
