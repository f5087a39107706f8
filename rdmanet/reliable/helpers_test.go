package reliable

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// Tests run on the software backend over loopback unless
// testenv.Device names a device (the rxe VM sets it): then they run on
// rdma-core bound to testenv.Addr, and a missing device fails them.
var (
	testDevice = testenv.Device()
	testAddr   = testenv.Addr()
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testDevice != "" {
		// The example uses the software backend on loopback, which cannot
		// bind UDP 4791 beside rxe: it runs in every `go test` outside
		// the VM (as rdmanet's examples).
		if s := flag.Lookup("test.skip"); s != nil && s.Value.String() == "" {
			flag.Set("test.skip", "^Example")
		}
	}
	os.Exit(m.Run())
}

func testListenConfig() *rdmanet.ListenConfig {
	if testDevice != "" {
		return &rdmanet.ListenConfig{Backend: rdmanet.BackendRDMACore, LocalAddr: net.ParseIP(testAddr), Device: testDevice}
	}
	return &rdmanet.ListenConfig{Backend: rdmanet.BackendSoftware}
}

var groupSeq atomic.Uint32

func newGroup() *net.UDPAddr {
	n := groupSeq.Add(1) + uint32(os.Getpid()%200)*256
	return &net.UDPAddr{IP: net.IPv4(239, 78, byte(n>>8), byte(n)), Port: 4791}
}

func listenT(t testing.TB, group *net.UDPAddr, cfg Config) *Conn {
	t.Helper()
	return listenDrop(t, group, cfg, nil)
}

// listenDrop listens with a drop hook: datagrams it returns true for are
// dropped on receipt, as if lost on the wire.
func listenDrop(t testing.TB, group *net.UDPAddr, cfg Config, drop func([]byte) bool) *Conn {
	t.Helper()
	c, err := listen(context.Background(), testListenConfig(), "rdma", nil, group, cfg, drop)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	if testDevice != "" {
		require.Equal(t, testDevice, c.Conn().Backend().Device)
	}
	return c
}

// payload fills b with a pattern of message i, so a reader checks both
// which message it got and that its bytes are intact.
func payload(b []byte, i uint64) []byte {
	for k := 0; k+8 <= len(b); k += 8 {
		binary.LittleEndian.PutUint64(b[k:], i*1000003+uint64(k))
	}
	if len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, i)
	}
	return b
}

// checkMessage returns the number of message b, checking its bytes.
func checkMessage(b []byte, size int) (uint64, error) {
	if len(b) != size {
		return 0, fmt.Errorf("got %d bytes, want %d", len(b), size)
	}
	if size < 8 {
		return 0, nil
	}
	i := binary.LittleEndian.Uint64(b)
	for k := 8; k+8 <= len(b); k += 8 {
		if got, want := binary.LittleEndian.Uint64(b[k:]), i*1000003+uint64(k); got != want {
			return i, fmt.Errorf("message %d: byte %d: got %#x, want %#x", i, k, got, want)
		}
	}
	return i, nil
}

// readAll reads count messages of size from c and checks they are 0,1,2...
// in order, each once; it returns the loss reports seen.
func readAll(c *Conn, count int, size int, timeout time.Duration) (losses uint64, err error) {
	buf := make([]byte, c.MaxMessage()+1)
	want := uint64(0)
	for want < uint64(count) {
		c.SetReadDeadline(time.Now().Add(timeout))
		n, _, err := c.ReadFrom(buf)
		var le *LossError
		if errors.As(err, &le) {
			losses += le.Messages
			want += le.Messages
			continue
		}
		if err != nil {
			return losses, fmt.Errorf("after message %d of %d: %w", want, count, err)
		}
		i, err := checkMessage(buf[:n], size)
		if err != nil {
			return losses, err
		}
		if size < 8 {
			i = want // too short to carry its number
		}
		if i != want {
			return losses, fmt.Errorf("got message %d, want %d", i, want)
		}
		want++
	}
	return losses, nil
}

// sendAll writes count messages of size from tx while every receiver of rx
// reads and checks them with readAll (no loss allowed). It fails at the
// first error of any of them, rather than leaving a FlowMin writer waiting
// for a receiver that stopped reading.
func sendAll(t testing.TB, tx *Conn, group net.Addr, rx []*Conn, count, size int, readTimeout time.Duration) {
	t.Helper()
	sendPaced(t, tx, group, rx, count, size, readTimeout, 0)
}

// sendPaced is sendAll with the sender writing at most rate messages a
// second (0: as fast as its flow control lets it): message i is written
// no sooner than i/rate after the first.
func sendPaced(t testing.TB, tx *Conn, group net.Addr, rx []*Conn, count, size int, readTimeout time.Duration, rate int) {
	t.Helper()
	errs := make(chan error, len(rx)+1)
	for i, r := range rx {
		go func() {
			losses, err := readAll(r, count, size, readTimeout)
			if err == nil && losses != 0 {
				err = fmt.Errorf("%d messages reported lost", losses)
			}
			if err != nil {
				err = fmt.Errorf("receiver %d: %w; its stats %+v", i, err, r.Stats())
			}
			errs <- err
		}()
	}
	go func() {
		b := make([]byte, size)
		start := time.Now()
		for i := uint64(0); i < uint64(count); i++ {
			if rate > 0 {
				if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
					time.Sleep(d)
				}
			}
			if _, err := tx.WriteTo(payload(b, i), group); err != nil {
				errs <- fmt.Errorf("write %d: %w; sender stats %+v", i, err, tx.Stats())
				return
			}
		}
		errs <- nil
	}()
	for range len(rx) + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// waitReceivers waits until tx knows n receivers (their status arrived):
// a FlowMin sender holds back only for receivers it knows.
func waitReceivers(t testing.TB, tx *Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for tx.Receivers() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the sender knows %d receivers after 10 s, want %d", tx.Receivers(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// handOverToReader waits until a reader in r's ReadFrom asks for the
// underlying conn, sends a datagram not of the protocol from raw (any
// datagram ends the receive loop's batch, and it hands over; r counts it
// Malformed) and waits until the reader reads the underlying conn itself
// (rxReader, blocked in it).
func handOverToReader(t testing.TB, r *Conn, raw *rdmanet.Conn, group *net.UDPAddr) {
	t.Helper()
	x := &r.rx
	locked := rxLocked(r)
	waitCond(t, "the reader asks for the underlying conn", locked(func() bool { return x.want }))
	_, err := raw.WriteTo([]byte("not ours"), group)
	require.NoError(t, err)
	waitCond(t, "the reader reads the underlying conn", locked(func() bool { return x.owner == rxReader && x.blocked }))
}

// waitReaderAsks waits until a reader in r's ReadFrom asks for the
// underlying conn, or already reads it (rxReader).
func waitReaderAsks(t testing.TB, r *Conn) {
	t.Helper()
	waitCond(t, "the reader asking for the underlying conn", rxLocked(r)(func() bool { return r.rx.want || r.rx.owner == rxReader }))
}

// readNAK reads datagrams from raw into buf until a NAK (the receivers'
// status reports are skipped) and returns its first seq, the session it
// asks and how many datagrams; what names the wait in a failure.
func readNAK(t testing.TB, raw *rdmanet.Conn, buf []byte, what string) (seq uint64, target, count uint32) {
	t.Helper()
	require.NoError(t, raw.SetReadDeadline(time.Now().Add(10*time.Second)))
	for {
		n, _, err := raw.ReadFrom(buf)
		require.NoError(t, err, what)
		var h header
		p, err := decode(buf[:n], &h)
		if err != nil || h.kind != kindNAK {
			continue
		}
		target, count, _ = parseNAK(p)
		return h.seq, target, count
	}
}

// rxLocked returns a wrapper of conditions on r.rx: each runs under
// r.rx.mu (for waitCond).
func rxLocked(r *Conn) func(f func() bool) func() bool {
	return func(f func() bool) func() bool {
		return func() bool {
			r.rx.mu.Lock()
			defer r.rx.mu.Unlock()
			return f()
		}
	}
}
