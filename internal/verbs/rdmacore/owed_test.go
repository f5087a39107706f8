//go:build linux

package rdmacore_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/rdmacore"
)

// TestDeviceGetEventsReadsOnlyWhatArmsOwe: a channel whose CQ was not
// armed is not read at all, and after one arm and its event GetEvents
// reads that event and stops, without the read(2) that would say EAGAIN
// (each is a crossing here; the read it saves is one per wake-up).
func TestDeviceGetEventsReadsOnlyWhatArmsOwe(t *testing.T) {
	d := needDevice(t)
	e := newEndpoint(t, d, verbs.QPConfig{})
	e.postRecvs(t, 0, 4)
	b := e.id.Local()
	ah, err := e.qp.CreateAH(verbs.AHAttr{DGID: b.GID, SGIDIndex: uint8(b.GIDIndex), HopLimit: 64, IsGlobal: true})
	require.NoError(t, err)
	cq := e.qp.RecvCQ()
	ch := cq.Channel()

	c0 := rdmacore.Crossings()
	n, err := ch.GetEvents()
	require.NoError(t, err)
	require.Zero(t, n, "events on a CQ never armed")
	require.Equal(t, c0, rdmacore.Crossings(), "GetEvents read a channel no arm could have raised an event on")

	require.NoError(t, cq.ReqNotify())
	e.send(t, ah, e.qp.QPN(), e.qp.QKey(), []byte("owed"), 0, 0)
	fds := []unix.PollFd{{Fd: int32(ch.Fd()), Events: unix.POLLIN}}
	k, err := unix.Poll(fds, 5000)
	require.NoError(t, err)
	require.Equal(t, 1, k, "no channel event within 5s of the completion")

	c1 := rdmacore.Crossings()
	n, err = ch.GetEvents()
	require.NoError(t, err)
	require.Equal(t, 1, n, "events after one arm and one completion")
	require.Equal(t, c1+1, rdmacore.Crossings(), "crossings for reading the one event")
	n, err = ch.GetEvents()
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, c1+1, rdmacore.Crossings(), "GetEvents read again with nothing owed")
	ch.AckEvents(1)

	wcs := make([]verbs.WC, 4)
	got, err := cq.Poll(wcs)
	require.NoError(t, err)
	require.Equal(t, 1, got, "the receive")
}
