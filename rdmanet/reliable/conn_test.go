package reliable

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
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

// WriteBatch sends many messages, fragmented ones among them, in few
// posts; receivers get each once, in order.
func TestWriteBatch(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	tx := listenT(t, group, Config{FlowControl: FlowMin})
	time.Sleep(20 * time.Millisecond)
	waitReceivers(t, tx, 1)
	const count = 2000
	sizes := []int{64, tx.frag * 2, 9, 20000}
	errc := make(chan error, 1)
	go func() {
		buf := make([]byte, tx.MaxMessage())
		for i := uint64(0); i < count; i++ {
			r.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _, err := r.ReadFrom(buf)
			if err == nil {
				var got uint64
				if got, err = checkMessage(buf[:n], sizes[i%4]); err == nil && sizes[i%4] >= 8 && got != i {
					err = fmt.Errorf("got message %d, want %d", got, i)
				}
			}
			if err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	batch := make([]rdmanet.Message, 100)
	for i := uint64(0); i < count; i += 100 {
		for k := range batch {
			batch[k] = rdmanet.Message{Buffer: payload(make([]byte, sizes[(i+uint64(k))%4]), i+uint64(k))}
		}
		n, err := tx.WriteBatch(batch)
		require.NoError(t, err)
		require.Equal(t, len(batch), n)
		for k := range batch {
			require.Equal(t, len(batch[k].Buffer), batch[k].N, "message %d of the batch: N", k)
		}
	}
	require.NoError(t, <-errc)
	require.Equal(t, uint64(count), tx.Stats().MessagesSent)
}
