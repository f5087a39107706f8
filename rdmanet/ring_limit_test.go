package rdmanet

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Each ring is at most 1 GiB: RecvDepth slots of GRH+MTU rounded up to
// 64 bytes, SendDepth slots of MTU. A depth that fills 1 GiB exactly, or
// as nearly as whole slots do, is accepted, one slot more is refused,
// naming the field. (No device known lets a QP that deep be made, so
// Listen never reaches the check: it is called on a conn that has only
// its MTU and depths.)
func TestRingBytesLimit(t *testing.T) {
	const gib = 1 << 30
	for _, mtu := range []int{256, 1024, 4096} {
		recvSlot := (verbs.GRHSize + mtu + 63) &^ 63
		for _, r := range []struct {
			name string
			slot int
			set  func(*ListenConfig, int)
		}{
			{"RecvDepth", recvSlot, func(lc *ListenConfig, d int) { lc.RecvDepth = d }},
			{"SendDepth", mtu, func(lc *ListenConfig, d int) { lc.SendDepth = d }},
		} {
			most := gib / r.slot
			check := func(depth int) error {
				c := &Conn{}
				c.mtu.Store(int32(mtu))
				c.cfg.RecvDepth, c.cfg.SendDepth = 64, 64
				r.set(&c.cfg, depth)
				return c.checkRings()
			}
			require.NoError(t, check(most), "MTU %d: %s %d, %d bytes", mtu, r.name, most, most*r.slot)
			err := check(most + 1)
			want := fmt.Sprintf("rdmanet: ListenConfig.%s %d takes %d-byte slots at MTU %d, over the limit of %d bytes (1 GiB) a ring",
				r.name, most+1, r.slot, mtu, gib)
			require.EqualError(t, err, want, "MTU %d: %s one slot past 1 GiB", mtu, r.name)
			require.Error(t, check(2*most), "MTU %d: %s at 2 GiB", mtu, r.name)
		}
	}
}
