//go:build linux

package soft

import (
	"errors"
	"net"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// fd0Open reports whether fd 0 is open: a failed call that returned 0 as
// its "fd" would have it closed by its caller's cleanup.
func fd0Open() bool {
	_, err := unix.FcntlInt(0, unix.F_GETFD, 0)
	return err == nil
}

// Out of fds (EMFILE), each call that makes an fd fails with the errno
// and returns no fd: -1, never 0, which its caller would take (and close)
// as its own.
func TestOutOfFdsEachCall(t *testing.T) {
	if !testenv.InChild(t) {
		return
	}
	internalQP(t, verbs.QPConfig{}) // the namespace's view and a QPN block kept
	require.True(t, fd0Open())
	before := testenv.OpenFds(t)
	restore := testenv.LimitFds(t, 0)
	fd, errSock := udpSocket(nil)
	ep, errEp := newEpoll(nil, nil)
	sub, errSub := subscribeNetlink()
	blk, errBlk := reserveBlock()
	qpn, errQPN := reserveQPN(1<<63 + 7) // a namespace with no block yet
	view, errView := readNetlinkView()
	view2, errView2 := currentNetlinkView(1<<63 + 7)
	errRoute := routeFrom([4]byte{127, 0, 0, 1}, [4]byte{127, 0, 0, 1})
	_, errLink := netlinkNetdev(1)
	id, errBind := Provider{}.Bind(verbs.BindConfig{})
	devs, errDevs := Provider{}.Devices()
	restore()

	assert.Equal(t, -1, fd, "udpSocket")
	assert.ErrorIs(t, errSock, unix.EMFILE)
	assert.ErrorContains(t, errSock, "socket")
	assert.Equal(t, -1, ep, "newEpoll")
	assert.ErrorIs(t, errEp, unix.EMFILE)
	assert.ErrorContains(t, errEp, "epoll_create1")
	assert.Equal(t, -1, sub, "subscribeNetlink")
	assert.ErrorIs(t, errSub, unix.EMFILE)
	assert.Nil(t, blk, "reserveBlock")
	assert.ErrorIs(t, errBlk, unix.EMFILE)
	assert.ErrorContains(t, errBlk, "reserve QPNs: socket")
	assert.Zero(t, qpn, "reserveQPN")
	assert.ErrorIs(t, errQPN, unix.EMFILE)
	assert.Nil(t, view, "readNetlinkView")
	assert.ErrorIs(t, errView, unix.EMFILE)
	assert.Nil(t, view2, "currentNetlinkView")
	assert.ErrorIs(t, errView2, unix.EMFILE)
	assert.ErrorIs(t, errRoute, unix.EMFILE, "routeFrom")
	assert.ErrorContains(t, errRoute, "socket")
	assert.ErrorIs(t, errLink, unix.EMFILE, "netlinkNetdev")
	assert.ErrorIs(t, errBind, verbs.ErrNoDevice, "Bind: no socket for the cookie, none to list the netdevs")
	assert.ErrorContains(t, errBind, "list netdevs")
	assert.ErrorContains(t, errBind, unix.EMFILE.Error())
	assert.Nil(t, devs, "Devices")
	assert.ErrorIs(t, errDevs, unix.EMFILE, "Devices: no socket to list the netdevs")
	if id != nil {
		id.Close()
	}
	assert.True(t, fd0Open(), "fd 0 closed")
	assert.Equal(t, before, testenv.OpenFds(t), "fds leaked")
}

// Bind reserves the ID's QPN: when the namespace's QPN blocks are full
// and no fd is left to reserve another, it fails with EMFILE
// (rdma_create_id) rather than hand out an ID with no QPN, and closes the
// socket it made for the QP.
func TestOutOfFdsBindReservesNoQPN(t *testing.T) {
	if !testenv.InChild(t) {
		return
	}
	warm := internalQP(t, verbs.QPConfig{}) // the view, a QPN block, the netpoller's fds
	cookie := netnsCookie(warm.uniFd)
	require.NotZero(t, cookie, "SO_NETNS_COOKIE")
	// Take every QPN left in the namespace's blocks.
	var taken []uint32
	func() {
		qpnPool.mu.Lock()
		defer qpnPool.mu.Unlock() // also if take panics: the QP's cleanup takes the lock
		for _, b := range qpnPool.blocks {
			if b.netns != cookie {
				continue
			}
			for q, ok := b.take(); ok; q, ok = b.take() {
				taken = append(taken, q)
				// A take that marks nothing would go on for ever.
				require.LessOrEqual(t, len(taken), len(qpnPool.blocks)*qpnBlockSize, "take handed out more QPNs than the blocks hold")
			}
		}
	}()
	require.NotEmpty(t, taken, "no block of the namespace had room")
	t.Cleanup(func() {
		for _, q := range taken {
			releaseQPN(cookie, q)
		}
	})
	require.True(t, fd0Open())
	before := testenv.OpenFds(t)

	// One fd free: Bind's socket takes it, none is left for a block.
	restore := testenv.LimitFds(t, 1)
	id, err := Provider{}.Bind(verbs.BindConfig{})
	restore()
	if id != nil {
		id.Close()
	}
	assert.Nil(t, id, "Bind handed out an ID without a QPN")
	assert.ErrorIs(t, err, unix.EMFILE)
	assert.ErrorContains(t, err, "rdma_create_id: reserve QPNs: socket")
	assert.True(t, fd0Open(), "fd 0 closed")
	assert.Equal(t, before, testenv.OpenFds(t), "fds leaked")

	// With an fd for a new block it succeeds, in a block of its own.
	id, err = Provider{}.Bind(verbs.BindConfig{})
	require.NoError(t, err)
	qpn := id.(*ID).qpn
	require.NoError(t, id.Close())
	assert.NotContains(t, taken, qpn)
}

// A change in the namespace that the cached netlink view could not be
// read again for (no fd for the dump) is not forgotten: the next look
// reads it, though the subscription has nothing more to say. Here an
// address added to lo, which Bind then finds.
func TestOutOfFdsViewReadAgain(t *testing.T) {
	if !testenv.InOwnNetns(t) || !testenv.InChild(t) {
		return
	}
	const addr = "10.9.9.9"
	warm := internalQP(t, verbs.QPConfig{}) // the namespace's view cached
	cookie := netnsCookie(warm.uniFd)
	require.NotZero(t, cookie, "SO_NETNS_COOKIE")
	out, err := exec.Command("ip", "addr", "add", addr+"/32", "dev", "lo").CombinedOutput()
	require.NoError(t, err, "ip addr add: %s", out)

	restore := testenv.LimitFds(t, 0)
	v, err := currentNetlinkView(cookie)
	restore()
	assert.Nil(t, v)
	assert.ErrorIs(t, err, unix.EMFILE, "the view read again with no fd")

	v, err = currentNetlinkView(cookie)
	require.NoError(t, err)
	require.NotNil(t, v, "no view and no error")
	assert.NotNil(t, v.owning(net.ParseIP(addr).To4()), "the address added before the failed read")
	id, err := Provider{}.Bind(verbs.BindConfig{Addr: net.ParseIP(addr)})
	require.NoError(t, err, "Bind to the address added")
	require.NoError(t, id.Close())
}

// CreateQP out of fds at each of the fds it makes fails with EMFILE, and
// closes what it made; with one more it succeeds. A retry on the same ID
// makes its unicast socket anew (the ID's socket went to the first try):
// when that fails, CreateQP fails, and does not close fd 0.
func TestOutOfFdsCreateQP(t *testing.T) {
	if !testenv.InChild(t) {
		return
	}
	warm := internalQP(t, verbs.QPConfig{}) // the view, a QPN block, the netpoller's fds
	w, err := warm.RecvCQ().NewWaiter(0)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	before := testenv.OpenFds(t)

	// One fd free: Bind takes it (the socket it hands to the QP).
	restore := testenv.LimitFds(t, 1)
	id, errBind := Provider{}.Bind(verbs.BindConfig{})
	var errs []error
	if errBind == nil {
		_, err = id.CreateQP(verbs.QPConfig{}) // the multicast socket
		errs = append(errs, err)
		restore()
		restore = testenv.LimitFds(t, 0)
		_, err = id.CreateQP(verbs.QPConfig{}) // the unicast socket, anew
		errs = append(errs, err)
	}
	restore()
	require.NoError(t, errBind, "Bind with one fd free")
	require.Len(t, errs, 2)
	assert.ErrorIs(t, errs[0], unix.EMFILE)
	assert.ErrorContains(t, errs[0], "multicast socket")
	assert.ErrorIs(t, errs[1], unix.EMFILE)
	assert.ErrorContains(t, errs[1], "unicast socket")
	assert.True(t, fd0Open(), "a failed CreateQP closed fd 0")
	require.NoError(t, id.Close())
	assert.Equal(t, before, testenv.OpenFds(t), "fds leaked")

	// Bind and CreateQP, then CreateAH to a unicast address, with ever
	// more fds free.
	var failed []string
	for free := 1; free < 10; free++ {
		restore := testenv.LimitFds(t, free)
		id, err := Provider{}.Bind(verbs.BindConfig{})
		var qp verbs.QP
		step := "Bind"
		if err == nil {
			step = "CreateQP"
			qp, err = id.CreateQP(verbs.QPConfig{})
		}
		if err == nil {
			step = "CreateAH"
			_, err = qp.CreateAH(verbs.AHAttr{DGID: id.Local().GID, IsGlobal: true})
		}
		restore()
		if id != nil {
			require.NoError(t, id.Close())
		}
		assert.True(t, fd0Open(), "%d fds free: fd 0 closed", free)
		assert.Equal(t, before, testenv.OpenFds(t), "%d fds free: fds leaked", free)
		if err == nil {
			break
		}
		assert.ErrorIs(t, err, unix.EMFILE, "%d fds free: %s", free, step)
		var msg string
		if e := errors.Unwrap(err); e != nil {
			msg = e.Error()
		}
		failed = append(failed, step+": "+msg)
	}
	t.Logf("failed: %q", failed)
	// The fds CreateQP makes past the ID's socket: the multicast socket,
	// the epoll set, the unicast watch's set; then CreateAH's route socket.
	require.Len(t, failed, 4)
	assert.Contains(t, failed[0], "CreateQP: multicast socket: socket")
	assert.Contains(t, failed[1], "CreateQP: epoll_create1")
	assert.Contains(t, failed[2], "CreateQP: epoll_create1")
	assert.Contains(t, failed[3], "CreateAH: socket")
}
