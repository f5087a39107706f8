package reliable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Messages of every size up to MaxMessage, fragmented or not, reach every
// receiver once, in order, intact.
func TestDeliverySizes(t *testing.T) {
	group := newGroup()
	rx := []*Conn{listenT(t, group, Config{}), listenT(t, group, Config{})}
	tx := listenT(t, group, Config{})
	time.Sleep(20 * time.Millisecond)
	sizes := []int{0, 1, 100, tx.mtu - headerLen, tx.mtu - headerLen + 1, 3 * tx.frag, 16 << 10, 64 << 10}
	for _, size := range sizes {
		errs := make(chan error, len(rx))
		for _, r := range rx {
			go func() {
				_, err := readAll(r, 50, size, 5*time.Second)
				errs <- err
			}()
		}
		b := make([]byte, size)
		for i := uint64(0); i < 50; i++ {
			_, err := tx.WriteTo(payload(b, i), group)
			require.NoError(t, err)
		}
		for range rx {
			require.NoError(t, <-errs, "size %d", size)
		}
		// the next size starts its numbering afresh: drain nothing, but
		// renumber by writing from 0 again
	}
}
