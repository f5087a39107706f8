package reliable

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Writing and reading a message allocates nothing at steady state, for a
// one-datagram message and a fragmented one, the protocol goroutines
// included (AllocsPerRun counts every goroutine's allocations).
func TestNoAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	group := newGroup()
	r := listenT(t, group, Config{})
	tx := listenT(t, group, Config{})
	time.Sleep(10 * time.Millisecond)
	for _, size := range []int{64, 16 << 10} {
		msg := make([]byte, size)
		buf := make([]byte, size)
		step := func() {
			if _, err := tx.WriteTo(msg, group); err != nil {
				panic(err)
			}
			r.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, _, err := r.ReadFrom(buf); err != nil || n != size {
				panic(err)
			}
		}
		for range 200 {
			step() // warm up: the peer, maps, timers
		}
		allocs := testing.AllocsPerRun(1000, step)
		require.Zero(t, allocs, "size %d: allocations per message", size)
		// AllocsPerRun rounds down: count the total too. What remains is
		// the runtime's, about one per wakeup of the timer loop (a select
		// parks on three channels), once a millisecond whatever the
		// message rate, not per message.
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 1000 {
			step()
		}
		runtime.ReadMemStats(&after)
		t.Logf("size %d: %d allocations in 1000 messages", size, after.Mallocs-before.Mallocs)
		require.Less(t, after.Mallocs-before.Mallocs, uint64(100), "size %d: allocations in 1000 messages", size)
	}
}

// ReadBatch allocates nothing at steady state either: a batch of 16
// messages written with WriteBatch and read with ReadBatch.
func TestNoAllocsReadBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	group := newGroup()
	r := listenT(t, group, Config{})
	tx := listenT(t, group, Config{})
	time.Sleep(10 * time.Millisecond)
	const size, batch = 64, 16
	out := make([][]byte, batch)
	for i := range out {
		out[i] = make([]byte, size)
	}
	in := batchT(batch, size)
	step := func() {
		if _, err := tx.WriteBatch(out); err != nil {
			panic(err)
		}
		for got := 0; got < batch; {
			r.SetReadDeadline(time.Now().Add(5 * time.Second))
			k, err := r.ReadBatch(in[got:])
			if err != nil {
				panic(err)
			}
			got += k
		}
	}
	for range 200 {
		step()
	}
	allocs := testing.AllocsPerRun(500, step)
	require.Zero(t, allocs, "allocations per batch of %d", batch)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 500 {
		step()
	}
	runtime.ReadMemStats(&after)
	t.Logf("%d allocations in 500 batches of %d", after.Mallocs-before.Mallocs, batch)
	require.Less(t, after.Mallocs-before.Mallocs, uint64(100), "allocations in 500 batches")
}
