//go:build linux

package reliable

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// Writing and reading a message allocates nothing at steady state, for a
// one-datagram message and a fragmented one, the protocol goroutines
// included (AllocsPerRun counts every goroutine's allocations).
// With a key (Config.Key), sealing and opening the trailer allocate
// nothing either.
func TestNoAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	t.Run("open", func(t *testing.T) { testNoAllocs(t, nil) })
	t.Run("keyed", func(t *testing.T) { testNoAllocs(t, testKey) })
}

func testNoAllocs(t *testing.T, key []byte) {
	group := newGroup()
	// No membership churn: a status or heartbeat late by the default
	// timeouts on a loaded emulated host makes the peer new again, and
	// recording a new peer allocates (once per peer, not per message).
	r := listenT(t, group, Config{SenderTimeout: time.Hour, Key: key})
	tx := listenT(t, group, Config{ReceiverTimeout: time.Hour, Key: key})
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
		for range 200 { // warm up: the peer, maps, timers
			step()
		}
		burst(t, tx, r, group, size)
		allocs := testing.AllocsPerRun(1000, step)
		require.Zero(t, allocs, "size %d: allocations per message", size)
		// AllocsPerRun rounds down: count the total too.
		steadyMallocs(t, fmt.Sprintf("size %d: 1000 messages", size), 1000, step)
	}
}

// ReadBatch allocates nothing at steady state either: a batch of 16
// messages written with WriteBatch and read with ReadBatch.
func TestNoAllocsReadBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	group := newGroup()
	// No membership churn: a status or heartbeat late by the default
	// timeouts on a loaded emulated host makes the peer new again, and
	// recording a new peer allocates (once per peer, not per message).
	r := listenT(t, group, Config{SenderTimeout: time.Hour})
	tx := listenT(t, group, Config{ReceiverTimeout: time.Hour})
	time.Sleep(10 * time.Millisecond)
	const size, batch = 64, 16
	out := make([]rdmanet.Message, batch)
	for i := range out {
		out[i].Buffer = make([]byte, size)
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
	steadyMallocs(t, fmt.Sprintf("500 batches of %d", batch), 500, step)
}

// burst writes batches of 64 messages before reading them, so the
// receive paths' scratch (which doubles when a read fills it, up to its
// batch size) has grown before anything is measured.
func burst(t *testing.T, tx, r *Conn, group net.Addr, size int) {
	batch := make([]rdmanet.Message, 64)
	for i := range batch {
		batch[i].Buffer = make([]byte, size)
	}
	buf := make([]byte, size)
	for range 4 {
		_, err := tx.WriteBatch(batch)
		require.NoError(t, err)
		for range batch {
			r.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _, err := r.ReadFrom(buf)
			require.NoError(t, err)
			require.Equal(t, size, n)
		}
	}
}

// steadyMallocs runs step n times with every allocation profiled
// (runtime.MemProfileRate 1) and fails on any allocation made for our
// code. What the Go runtime allocates for its own bookkeeping is counted
// and logged, not failed: its sudog caches refilling (goroutines that park
// on a channel or a contended mutex on one P and wake on another move
// sudogs between the Ps' caches; under emulation, where more parks happen
// per message, tens per thousand messages), a P's timer heap growing the
// first time a timer lands on it, a type-assertion cache. AllocsPerRun
// alone rounds down; this names any allocation of ours.
func steadyMallocs(t *testing.T, what string, n int, step func()) {
	t.Helper()
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	for range n / 10 {
		step()
	}
	before := memProfile()
	for range n {
		step()
	}
	after := memProfile()
	var runtimes, grown int64
	var ours []string
	for stack, objs := range after {
		d := objs - before[stack]
		if d <= 0 {
			continue
		}
		by, frames := allocatedBy(stack)
		switch {
		case strings.HasPrefix(by, "runtime."):
			runtimes += d
		case by == "github.com/go-rdma/rdmanet/rdmanet/reliable.memProfile":
			// the previous snapshot's own allocations
		case by == "github.com/go-rdma/rdmanet/internal/verbs/soft.(*recvCQ).growScratch":
			grown += d // bounded: checked below
		default:
			ours = append(ours, fmt.Sprintf("%d: %s", d, frames))
		}
	}
	t.Logf("%s: %d allocations by the runtime for itself, %d growing receive scratch, %d stacks of others",
		what, runtimes, grown, len(ours))
	require.Empty(t, ours, "%s: allocations", what)
	// The software backend's receive scratch starts at 8 slots and
	// doubles when a read fills it, up to 32: at most two growths of 7
	// slices per conn in its life, and burst has usually done them; two
	// conns here. Growth past that would be an allocation per read.
	require.LessOrEqual(t, grown, int64(2*2*7), "%s: receive scratch grew more than twice per conn", what)
}

// allocatedBy returns the function an allocation was made for: the first
// frame past the runtime's allocation entry points (mallocgc, newobject,
// growslice, interface conversions, string and map helpers, which
// allocate on a caller's behalf); a runtime.* answer is the runtime
// allocating for itself. It also returns the whole stack.
func allocatedBy(stack [32]uintptr) (string, string) {
	pcs := stack[:]
	for i, pc := range pcs {
		if pc == 0 {
			pcs = pcs[:i]
			break
		}
	}
	var b strings.Builder
	by := ""
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		fmt.Fprintf(&b, "%s:%d ", f.Function, f.Line)
		if by == "" && !onBehalf(f.Function) {
			by = f.Function
		}
		if !more {
			return by, b.String()
		}
	}
}

func onBehalf(fn string) bool {
	if strings.HasPrefix(fn, "internal/runtime/maps.") {
		return true
	}
	for _, p := range []string{"mallocgc", "newobject", "newarray", "growslice", "makeslice",
		"conv", "concatstring", "rawstring", "slicebytetostring", "stringtoslice", "makemap", "mapassign", "newproc"} {
		if strings.HasPrefix(fn, "runtime."+p) {
			return true
		}
	}
	return false
}

// memProfile returns the allocation counts by stack, as of a completed
// GC (the profile lags a cycle behind, so two).
func memProfile() map[[32]uintptr]int64 {
	runtime.GC()
	runtime.GC()
	n, _ := runtime.MemProfile(nil, true)
	recs := make([]runtime.MemProfileRecord, n+64)
	n, _ = runtime.MemProfile(recs, true)
	m := make(map[[32]uintptr]int64, n)
	for _, r := range recs[:n] {
		m[r.Stack0] += r.AllocObjects
	}
	return m
}
