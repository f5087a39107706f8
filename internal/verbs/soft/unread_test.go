//go:build linux

package soft_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// The send CQ's Unread sees the completions its ring holds, always
// knowing: none before a send, one after a signaled send until Poll takes
// it, none once closed.
func TestSendCQUnread(t *testing.T) {
	e := newEndpoint(t, verbs.QPConfig{})
	_, ah := e.join("239.202.9.7", true)
	cq := e.qp.SendCQ()
	check := func(want bool, what string) {
		t.Helper()
		pending, known := cq.Unread()
		require.True(t, known, what)
		require.Equal(t, want, pending, what)
	}
	check(false, "nothing sent")
	wr := verbs.SendWR{WRID: 1, SGE: e.sendSGE(0, 64), AH: ah, RemoteQPN: verbs.MulticastQPN,
		RemoteQKey: e.qp.QKey(), Flags: verbs.SendSignaled}
	n, err := e.qp.PostSend([]verbs.SendWR{wr})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	check(true, "a signaled send's completion queued")
	wcs := make([]verbs.WC, 4)
	n, err = cq.Poll(wcs)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	check(false, "polled")
	n, err = e.qp.PostSend([]verbs.SendWR{wr})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, e.id.Close())
	check(false, "closed, a completion left")
}
