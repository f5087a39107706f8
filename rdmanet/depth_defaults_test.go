//go:build linux

package rdmanet_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// The ring depths as ListenConfig documents them: RecvDepth 64 and
// SendDepth 256 by default on the software backend, a SendDepth under 4
// raised to 4 (and such a conn sends), others as asked.
func TestRingDepthDefaults(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("the software backend's defaults")
	}
	g := newGroup()
	rx := listen(t, g)
	recv, send := rdmanet.Depths(rx)
	require.Equal(t, 64, recv, "RecvDepth by default on the software backend")
	require.Equal(t, 256, send, "SendDepth by default")
	for _, d := range []int{1, 2, 3, 4, 5} {
		tx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.SendDepth, lc.RecvDepth = d, d })
		recv, send := rdmanet.Depths(tx)
		require.Equal(t, max(d, 4), send, "SendDepth %d", d)
		require.Equal(t, d, recv, "RecvDepth %d", d)
		for i := range 6 { // more than the ring: slots are reused
			msg := fmt.Sprint("depth", d, "-", i)
			_, err := tx.WriteTo([]byte(msg), g)
			require.NoError(t, err, "SendDepth %d, write %d", d, i)
			b, _ := mustRead(t, rx)
			require.Equal(t, msg, string(b))
		}
		tx.Close()
	}
}
