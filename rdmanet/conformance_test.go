//go:build linux

package rdmanet_test

// The net.PacketConn conformance table: one set of cases run against
// net.UDPConn (multicast on lo, the reference) and against rdmanet on the
// backend under test (software here, rdma-core in the rxe VM). A case
// passes on every subject, or it names the difference (differ) and asserts
// what the subject does instead; docs/conformance.md lists the
// differences and the results of these runs.
//
//	go test -run Conformance -v ./rdmanet | grep CONFORMANCE
//	make test-rxe RXEVM_PKGS=./rdmanet RXEVM_TEST_RUN=Conformance

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/ipv4"
)

// subject is one net.PacketConn implementation the table runs against.
type subject struct {
	name string
	rdma bool
	// open returns a receiver and a sender in a fresh group, and the
	// address the sender writes to.
	open func(t *testing.T) *pcPair
	// openStuck returns a pair whose sender's writes block once a few
	// were made (nil where no write can be made to block).
	openStuck func(t *testing.T) *pcPair
}

type pcPair struct {
	rx, tx net.PacketConn
	dst    net.Addr
	max    int // the largest payload one datagram carries
	unjoin net.Addr
}

// udpMaxPayload is IPv4 UDP's largest payload: 65535 - 20 - 8.
const udpMaxPayload = 65507

var udpPort atomic.Uint32

func udpSubject() subject {
	return subject{name: "net.UDPConn", open: func(t *testing.T) *pcPair {
		lo, err := net.InterfaceByName("lo")
		require.NoError(t, err)
		n := groupSeq.Add(1) + uint32(os.Getpid()%200)*256
		g := &net.UDPAddr{IP: net.IPv4(239, 78, byte(n>>8), byte(n)), Port: 20000 + int(udpPort.Add(1)+uint32(os.Getpid()%100)*100)%40000}
		rx, err := net.ListenMulticastUDP("udp4", lo, g)
		require.NoError(t, err)
		t.Cleanup(func() { rx.Close() })
		tx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		require.NoError(t, err)
		t.Cleanup(func() { tx.Close() })
		p := ipv4.NewPacketConn(tx)
		require.NoError(t, p.SetMulticastInterface(lo))
		require.NoError(t, p.SetMulticastLoopback(true))
		return &pcPair{rx: rx, tx: tx, dst: g, max: udpMaxPayload,
			unjoin: &net.UDPAddr{IP: net.IPv4(239, 79, 0, 1), Port: g.Port}}
	}}
}

func rdmanetSubject() subject {
	name := rdmanet.BackendSoftware
	if testDevice != "" {
		name = rdmanet.BackendRDMACore + " (" + testDevice + ")"
	}
	s := subject{name: name, rdma: true, open: func(t *testing.T) *pcPair {
		g := newGroup()
		rx, tx := listen(t, g), listen(t, g)
		return &pcPair{rx: rx, tx: tx, dst: g, max: min(rx.MTU(), tx.MTU()),
			unjoin: &net.UDPAddr{IP: net.IPv4(239, 79, 0, 1)}}
	}}
	// A send CQ that never completes: the ring of 8 fills, the 9th write
	// blocks. The sends themselves go to the device.
	s.openStuck = func(t *testing.T) *pcPair {
		g := newGroup()
		lc := testConfig()
		lc.Backend, lc.SendDepth = rdmanet.BackendStuckSends, 8
		if testDevice != "" {
			lc.Backend = rdmanet.BackendStuckSendsRDMACore
		}
		tx, err := lc.ListenMulticast(t.Context(), "rdma", nil, g)
		require.NoError(t, err)
		t.Cleanup(func() { tx.Close() })
		for i := 0; i < 8; i++ {
			_, err := tx.WriteTo([]byte("fill"), g)
			require.NoError(t, err)
		}
		return &pcPair{tx: tx, dst: g, max: tx.MTU()}
	}
	return s
}

// conformance records each case's outcome per subject for the table.
var conformance struct {
	sync.Mutex
	caseOf map[string]string            // test name -> case
	res    map[string]map[string]string // case -> subject -> outcome
}

// differ records that the subject differs from net.UDPConn in this case,
// and why; the case then asserts what the subject does instead.
func differ(t *testing.T, s subject, why string) {
	t.Helper()
	t.Logf("%s differs: %s", s.name, why)
	note(t, s, "differs: "+why)
}

func note(t *testing.T, s subject, outcome string) {
	conformance.Lock()
	defer conformance.Unlock()
	c := conformance.caseOf[t.Name()]
	if conformance.res[c] == nil {
		conformance.res[c] = map[string]string{}
	}
	if old, ok := conformance.res[c][s.name]; ok && strings.HasPrefix(old, "differs") && outcome == "pass" {
		return
	}
	conformance.res[c][s.name] = outcome
}

// timeoutErr asserts err is what a deadline gives: a *net.OpError for
// which errors.Is(err, os.ErrDeadlineExceeded) and Timeout() hold.
func timeoutErr(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, "%s: got no error, want a timeout", what)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, what)
	require.True(t, isTimeout(err), "%s: Timeout() is false for %v", what, err)
	var op *net.OpError
	require.ErrorAs(t, err, &op, what)
}

func closedErr(t *testing.T, err error, what string) {
	t.Helper()
	require.ErrorIs(t, err, net.ErrClosed, what)
	var op *net.OpError
	require.ErrorAs(t, err, &op, what)
}

// closedErrs waits (5 s at most) for n calls that end at Close to send
// their errors on errc, and checks each with closedErr.
func closedErrs(t *testing.T, errc <-chan error, n int, what string) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case err := <-errc:
			closedErr(t, err, what)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: %d of %d calls did not end at Close", what, n-i, n)
		}
	}
}

// atOnce is how long "at once" may take on a loaded 2-core machine or in
// the emulated VM.
const atOnce = time.Second

// readWithin reads one datagram with a deadline d from now.
func readWithin(c net.PacketConn, b []byte, d time.Duration) (int, net.Addr, error) {
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	return c.ReadFrom(b)
}

func mustGet(t *testing.T, c net.PacketConn, want string) {
	t.Helper()
	b := make([]byte, 70000)
	n, _, err := readWithin(c, b, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, want, string(b[:n]))
}

func getNothing(t *testing.T, c net.PacketConn, d time.Duration) {
	t.Helper()
	b := make([]byte, 70000)
	n, from, err := readWithin(c, b, d)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "got %q from %v, want nothing", b[:n], from)
}

func send(t *testing.T, p *pcPair, msg string) {
	t.Helper()
	n, err := p.tx.WriteTo([]byte(msg), p.dst)
	require.NoError(t, err)
	require.Equal(t, len(msg), n)
}

// blockedRead starts a ReadFrom on c and returns its outcome's channel;
// it waits until the read has had time to block.
func blockedRead(c net.PacketConn) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		b := make([]byte, 70000)
		n, _, err := c.ReadFrom(b)
		ch <- readResult{string(b[:n]), err, time.Now()}
	}()
	time.Sleep(50 * time.Millisecond)
	return ch
}

// blockedWrite opens s's stuck pair, skipping t where a write cannot
// block, and starts a WriteTo that blocks on the full send ring; its error
// comes on the channel.
func blockedWrite(t *testing.T, s subject) (*pcPair, <-chan error) {
	t.Helper()
	if s.openStuck == nil {
		t.Skip("n/a: a UDP send on loopback does not block")
	}
	p := s.openStuck(t)
	errc := make(chan error, 1)
	go func() {
		_, err := p.tx.WriteTo([]byte("blocked"), p.dst)
		errc <- err
	}()
	return p, errc
}

type readResult struct {
	payload string
	err     error
	at      time.Time
}

func await(t *testing.T, ch <-chan readResult, within time.Duration, what string) readResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(within):
		t.Fatalf("%s: still blocked after %v", what, within)
	}
	return readResult{}
}

type conformanceCase struct {
	name string
	run  func(t *testing.T, s subject)
}

var conformanceCases = []conformanceCase{
	{"read deadline past, datagram waiting", func(t *testing.T, s subject) {
		p := s.open(t)
		send(t, p, "first")
		send(t, p, "second")
		time.Sleep(50 * time.Millisecond) // both are there
		mustGet(t, p.rx, "first")         // rdmanet: "second" is now a polled completion
		require.NoError(t, p.rx.SetReadDeadline(time.Now().Add(-time.Second)))
		start := time.Now()
		_, _, err := p.rx.ReadFrom(make([]byte, 100))
		timeoutErr(t, err, "ReadFrom after the deadline, a datagram waiting")
		require.Less(t, time.Since(start), atOnce)
		require.NoError(t, p.rx.SetReadDeadline(time.Time{}))
		mustGet(t, p.rx, "second") // the timed-out read took nothing
	}},
	{"read deadline past, nothing waiting", func(t *testing.T, s subject) {
		p := s.open(t)
		require.NoError(t, p.rx.SetReadDeadline(time.Now().Add(-time.Second)))
		start := time.Now()
		_, _, err := p.rx.ReadFrom(make([]byte, 100))
		timeoutErr(t, err, "ReadFrom")
		require.Less(t, time.Since(start), atOnce)
	}},
	{"read deadline present (now)", func(t *testing.T, s subject) {
		p := s.open(t)
		require.NoError(t, p.rx.SetReadDeadline(time.Now()))
		_, _, err := p.rx.ReadFrom(make([]byte, 100))
		timeoutErr(t, err, "ReadFrom")
	}},
	{"read deadline future expires", func(t *testing.T, s subject) {
		p := s.open(t)
		d := time.Now().Add(100 * time.Millisecond)
		require.NoError(t, p.rx.SetReadDeadline(d))
		_, _, err := p.rx.ReadFrom(make([]byte, 100))
		timeoutErr(t, err, "ReadFrom")
		require.False(t, time.Now().Before(d), "returned before the deadline")
		require.Less(t, time.Since(d), 3*time.Second)
	}},
	{"read deadline future, datagram first", func(t *testing.T, s subject) {
		p := s.open(t)
		require.NoError(t, p.rx.SetReadDeadline(time.Now().Add(5*time.Second)))
		ch := blockedRead(p.rx)
		send(t, p, "in time")
		r := await(t, ch, 5*time.Second, "ReadFrom")
		require.NoError(t, r.err)
		require.Equal(t, "in time", r.payload)
	}},
	{"read deadline moved earlier while blocked", func(t *testing.T, s subject) {
		p := s.open(t)
		ch := blockedRead(p.rx)
		require.NoError(t, p.rx.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
		timeoutErr(t, await(t, ch, 5*time.Second, "ReadFrom").err, "ReadFrom")
	}},
	{"read deadline moved to the past wakes a blocked read", func(t *testing.T, s subject) {
		p := s.open(t)
		ch := blockedRead(p.rx)
		require.NoError(t, p.rx.SetReadDeadline(time.Now().Add(-time.Second)))
		timeoutErr(t, await(t, ch, atOnce+time.Second, "ReadFrom").err, "ReadFrom")
	}},
	{"read deadline moved later while blocked", func(t *testing.T, s subject) {
		p := s.open(t)
		// The move must come before the old deadline: where the
		// machine stalls past it first (the VM's emulated CPUs, on a
		// loaded host, stalled a net.UDPConn's 100 ms), the try says
		// nothing and is made again.
		for try := 1; ; try++ {
			old := time.Now().Add(300 * time.Millisecond)
			require.NoError(t, p.rx.SetReadDeadline(old))
			ch := blockedRead(p.rx)
			d := time.Now().Add(600 * time.Millisecond)
			require.NoError(t, p.rx.SetReadDeadline(d))
			moved := time.Now()
			r := await(t, ch, 5*time.Second, "ReadFrom")
			timeoutErr(t, r.err, "ReadFrom")
			if !moved.Before(old) && try < 3 {
				t.Logf("try %d: the deadline moved %v after the old one had passed; again", try, moved.Sub(old))
				continue
			}
			require.True(t, moved.Before(old), "three tries stalled past the old deadline before the move")
			require.False(t, r.at.Before(d), "returned at the old deadline, not the new one")
			return
		}
	}},
	{"read deadline cleared while blocked", func(t *testing.T, s subject) {
		p := s.open(t)
		// The old deadline leaves blockedRead's 50 ms a wide margin: under
		// emulation (the rxe VM) a 50 ms sleep has taken over 100 ms.
		require.NoError(t, p.rx.SetReadDeadline(time.Now().Add(500*time.Millisecond)))
		ch := blockedRead(p.rx)
		require.NoError(t, p.rx.SetReadDeadline(time.Time{}))
		time.Sleep(600 * time.Millisecond) // past the old deadline
		send(t, p, "no deadline")
		r := await(t, ch, 5*time.Second, "ReadFrom")
		require.NoError(t, r.err)
		require.Equal(t, "no deadline", r.payload)
	}},
	{"read deadline cleared after a timeout", func(t *testing.T, s subject) {
		p := s.open(t)
		require.NoError(t, p.rx.SetReadDeadline(time.Now().Add(-time.Second)))
		_, _, err := p.rx.ReadFrom(make([]byte, 100))
		timeoutErr(t, err, "ReadFrom")
		require.NoError(t, p.rx.SetReadDeadline(time.Time{}))
		send(t, p, "again")
		b := make([]byte, 100)
		n, _, err := p.rx.ReadFrom(b)
		require.NoError(t, err)
		require.Equal(t, "again", string(b[:n]))
	}},
	{"write deadline past", func(t *testing.T, s subject) {
		p := s.open(t)
		require.NoError(t, p.tx.SetWriteDeadline(time.Now().Add(-time.Second)))
		start := time.Now()
		n, err := p.tx.WriteTo([]byte("late"), p.dst)
		timeoutErr(t, err, "WriteTo after the write deadline")
		require.Zero(t, n)
		require.Less(t, time.Since(start), atOnce)
		getNothing(t, p.rx, 100*time.Millisecond)
		require.NoError(t, p.tx.SetWriteDeadline(time.Time{}))
		send(t, p, "cleared")
		mustGet(t, p.rx, "cleared")
	}},
	{"write deadline present (now)", func(t *testing.T, s subject) {
		p := s.open(t)
		require.NoError(t, p.tx.SetWriteDeadline(time.Now()))
		_, err := p.tx.WriteTo([]byte("now"), p.dst)
		timeoutErr(t, err, "WriteTo")
	}},
	{"write deadline future", func(t *testing.T, s subject) {
		p := s.open(t)
		require.NoError(t, p.tx.SetWriteDeadline(time.Now().Add(5*time.Second)))
		send(t, p, "in time")
		mustGet(t, p.rx, "in time")
	}},
	{"write deadline moved while a write is blocked", func(t *testing.T, s subject) {
		p, errc := blockedWrite(t, s)
		select {
		case err := <-errc:
			t.Fatalf("WriteTo returned %v with the send ring full", err)
		case <-time.After(50 * time.Millisecond):
		}
		require.NoError(t, p.tx.SetWriteDeadline(time.Now().Add(20*time.Millisecond)))
		select {
		case err := <-errc:
			timeoutErr(t, err, "blocked WriteTo")
		case <-time.After(5 * time.Second):
			t.Fatal("moving the write deadline did not wake the blocked WriteTo")
		}
	}},
	{"read deadline leaves writes alone", func(t *testing.T, s subject) {
		p := s.open(t)
		require.NoError(t, p.tx.SetReadDeadline(time.Now().Add(-time.Second)))
		send(t, p, "write")
		require.NoError(t, p.rx.SetWriteDeadline(time.Now().Add(-time.Second)))
		mustGet(t, p.rx, "write")
	}},
	{"SetDeadline sets both", func(t *testing.T, s subject) {
		p := s.open(t)
		require.NoError(t, p.tx.SetDeadline(time.Now().Add(-time.Second)))
		_, err := p.tx.WriteTo([]byte("x"), p.dst)
		timeoutErr(t, err, "WriteTo")
		_, _, err = p.tx.ReadFrom(make([]byte, 10))
		timeoutErr(t, err, "ReadFrom")
		require.NoError(t, p.tx.SetDeadline(time.Time{}))
		send(t, p, "both cleared")
		mustGet(t, p.rx, "both cleared")
	}},
	{"concurrent reads and writes while deadlines move", func(t *testing.T, s subject) {
		p := s.open(t)
		const writers, readers, writes = 4, 2, 300
		got := make(chan string, writers*writes+16)
		var rwg, wwg sync.WaitGroup
		fail := make(chan error, writers+readers)
		for i := 0; i < readers; i++ {
			rwg.Add(1)
			go func() {
				defer rwg.Done()
				b := make([]byte, 100)
				for {
					n, _, err := p.rx.ReadFrom(b)
					switch {
					case err == nil:
						got <- string(b[:n])
					case isTimeout(err):
					case errors.Is(err, net.ErrClosed):
						return
					default:
						fail <- err
						return
					}
				}
			}()
		}
		for i := 0; i < writers; i++ {
			wwg.Add(1)
			go func() {
				defer wwg.Done()
				for j := 0; j < writes; j++ {
					if _, err := p.tx.WriteTo([]byte("w"), p.dst); err != nil && !isTimeout(err) {
						fail <- err
						return
					}
				}
			}()
		}
		churnDeadlines(t, p.tx.SetWriteDeadline, p.rx.SetReadDeadline)
		require.NoError(t, p.tx.SetWriteDeadline(time.Time{}))
		require.NoError(t, p.rx.SetReadDeadline(time.Time{}))
		done := make(chan struct{})
		go func() { wwg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("writers hung while the deadline moved")
		}
		// Deadlines cleared: the conns still work.
		send(t, p, "final")
		timeout := time.After(5 * time.Second)
	wait:
		for {
			select {
			case m := <-got:
				if m == "final" {
					break wait
				}
			case <-timeout:
				t.Fatal("after the deadlines were cleared, a datagram did not reach the readers")
			}
		}
		require.NoError(t, p.rx.Close())
		rdone := make(chan struct{})
		go func() { rwg.Wait(); close(rdone) }()
		select {
		case <-rdone:
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not end the readers")
		}
		select {
		case err := <-fail:
			t.Fatalf("an error that is neither a timeout nor net.ErrClosed: %v", err)
		default:
		}
	}},
	{"blocked writes while the deadline moves", func(t *testing.T, s subject) {
		if s.openStuck == nil {
			t.Skip("n/a: a UDP send on loopback does not block")
		}
		p := s.openStuck(t)
		const writers = 6
		var timeouts atomic.Int32
		errc := make(chan error, writers)
		for i := 0; i < writers; i++ {
			go func() {
				for {
					_, err := p.tx.WriteTo([]byte("w"), p.dst)
					switch {
					case isTimeout(err):
						timeouts.Add(1)
					case err == nil:
						errc <- errors.New("WriteTo succeeded with the send ring full")
						return
					default:
						errc <- err
						return
					}
				}
			}()
		}
		churnDeadlines(t, p.tx.SetWriteDeadline)
		require.NoError(t, p.tx.SetWriteDeadline(time.Time{}))
		require.NotZero(t, timeouts.Load(), "no blocked write ever timed out")
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, p.tx.Close())
		closedErrs(t, errc, writers, "blocked WriteTo at Close")
	}},
	{"Close during a blocked read", func(t *testing.T, s subject) {
		p := s.open(t)
		ch := blockedRead(p.rx)
		require.NoError(t, p.rx.Close())
		closedErr(t, await(t, ch, 5*time.Second, "ReadFrom").err, "ReadFrom blocked at Close")
	}},
	{"Close during a blocked write", func(t *testing.T, s subject) {
		p, errc := blockedWrite(t, s)
		time.Sleep(50 * time.Millisecond)
		require.NoError(t, p.tx.Close())
		closedErrs(t, errc, 1, "WriteTo blocked at Close")
	}},
	{"Close during writes", func(t *testing.T, s subject) {
		p := s.open(t)
		const writers = 4
		errc := make(chan error, writers)
		for i := 0; i < writers; i++ {
			go func() {
				for {
					if _, err := p.tx.WriteTo([]byte("w"), p.dst); err != nil {
						errc <- err
						return
					}
				}
			}()
		}
		time.Sleep(30 * time.Millisecond)
		require.NoError(t, p.tx.Close())
		closedErrs(t, errc, writers, "WriteTo at Close")
	}},
	{"Close twice", func(t *testing.T, s subject) {
		p := s.open(t)
		require.NoError(t, p.rx.Close())
		err := p.rx.Close()
		closedErr(t, err, "second Close")
		require.Equal(t, "close", err.(*net.OpError).Op)
	}},
	{"calls after Close", func(t *testing.T, s subject) {
		p := s.open(t)
		local := p.tx.LocalAddr().String()
		require.NoError(t, p.tx.Close())
		_, _, err := p.tx.ReadFrom(make([]byte, 10))
		closedErr(t, err, "ReadFrom")
		_, err = p.tx.WriteTo([]byte("x"), p.dst)
		closedErr(t, err, "WriteTo")
		closedErr(t, p.tx.SetDeadline(time.Now()), "SetDeadline")
		closedErr(t, p.tx.SetReadDeadline(time.Now()), "SetReadDeadline")
		closedErr(t, p.tx.SetWriteDeadline(time.Time{}), "SetWriteDeadline")
		require.Equal(t, local, p.tx.LocalAddr().String(), "LocalAddr after Close")
	}},
	{"short read buffer truncates", func(t *testing.T, s subject) {
		p := s.open(t)
		send(t, p, "0123456789")
		send(t, p, "next")
		b := make([]byte, 4)
		n, _, err := readWithin(p.rx, b, 5*time.Second)
		require.NoError(t, err, "truncation is no error")
		require.Equal(t, 4, n)
		require.Equal(t, "0123", string(b))
		mustGet(t, p.rx, "next") // the rest of the long one is gone
	}},
	{"zero-length datagram", func(t *testing.T, s subject) {
		p := s.open(t)
		n, err := p.tx.WriteTo(nil, p.dst)
		require.NoError(t, err)
		require.Zero(t, n)
		n, err = p.tx.WriteTo([]byte{}, p.dst)
		require.NoError(t, err)
		require.Zero(t, n)
		for i := 0; i < 2; i++ {
			n, from, err := readWithin(p.rx, make([]byte, 10), 5*time.Second)
			require.NoError(t, err)
			require.Zero(t, n)
			require.NotNil(t, from)
		}
	}},
	{"datagram boundaries and sender", func(t *testing.T, s subject) {
		p := s.open(t)
		msgs := []string{"a", strings.Repeat("b", 100), strings.Repeat("c", 1000)}
		for _, m := range msgs {
			send(t, p, m)
		}
		b := make([]byte, 2000)
		for _, m := range msgs {
			n, from, err := readWithin(p.rx, b, 5*time.Second)
			require.NoError(t, err)
			require.Equal(t, m, string(b[:n]))
			require.Equal(t, p.tx.LocalAddr().String(), from.String(), "ReadFrom's address is the sender's LocalAddr")
			require.Equal(t, p.tx.LocalAddr().Network(), from.Network())
		}
	}},
	{"largest datagram", func(t *testing.T, s subject) {
		p := s.open(t)
		if s.rdma {
			differ(t, s, fmt.Sprintf("the largest datagram is the path MTU, %d bytes, not 65507: UD sends one packet and has no fragmentation", p.max))
		}
		msg := bytes.Repeat([]byte{0x5a}, p.max)
		n, err := p.tx.WriteTo(msg, p.dst)
		require.NoError(t, err)
		require.Equal(t, p.max, n)
		b := make([]byte, p.max+100)
		n, _, err = readWithin(p.rx, b, 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, msg, b[:n])
	}},
	{"oversize write", func(t *testing.T, s subject) {
		p := s.open(t)
		n, err := p.tx.WriteTo(make([]byte, p.max+1), p.dst)
		require.Zero(t, n)
		var op *net.OpError
		require.ErrorAs(t, err, &op)
		if s.rdma {
			differ(t, s, "fails with rdmanet.ErrMessageTooLong (above the path MTU), where UDP's kernel says EMSGSIZE above 65507")
			require.ErrorIs(t, err, rdmanet.ErrMessageTooLong)
		} else {
			require.ErrorIs(t, err, syscall.EMSGSIZE)
		}
		getNothing(t, p.rx, 100*time.Millisecond)
	}},
	{"wrong address types", func(t *testing.T, s subject) {
		p := s.open(t)
		for _, a := range []net.Addr{
			nil,
			(*net.UDPAddr)(nil),
			&net.TCPAddr{IP: net.IPv4(239, 1, 1, 1), Port: 1},
			&net.UnixAddr{Name: "/tmp/x", Net: "unixgram"},
		} {
			n, err := p.tx.WriteTo([]byte("x"), a)
			require.Error(t, err, "WriteTo(%T %v)", a, a)
			require.Zero(t, n)
			var op *net.OpError
			require.ErrorAs(t, err, &op, "WriteTo(%T)", a)
		}
		getNothing(t, p.rx, 100*time.Millisecond)
	}},
	{"group as *net.IPAddr", func(t *testing.T, s subject) {
		p := s.open(t)
		ip := &net.IPAddr{IP: p.dst.(*net.UDPAddr).IP}
		n, err := p.tx.WriteTo([]byte("ipaddr"), ip)
		if s.rdma {
			differ(t, s, "a multicast *net.IPAddr names the group, as JoinGroup takes it (golang.org/x/net/ipv4's JoinGroup takes both): the group's port means nothing in RDMA multicast")
			require.NoError(t, err)
			require.Equal(t, len("ipaddr"), n)
			mustGet(t, p.rx, "ipaddr")
			return
		}
		require.Error(t, err, "net.UDPConn.WriteTo(*net.IPAddr)")
		require.ErrorIs(t, err, syscall.EINVAL)
		require.Zero(t, n)
		getNothing(t, p.rx, 100*time.Millisecond)
	}},
	{"SetReadBuffer and SetWriteBuffer", func(t *testing.T, s subject) {
		type buffers interface {
			SetReadBuffer(bytes int) error
			SetWriteBuffer(bytes int) error
		}
		p := s.open(t)
		rx, ok := p.rx.(buffers)
		require.True(t, ok, "%T has no SetReadBuffer", p.rx)
		tx, ok := p.tx.(buffers)
		require.True(t, ok, "%T has no SetWriteBuffer", p.tx)
		require.NoError(t, rx.SetReadBuffer(64<<10))
		require.NoError(t, tx.SetWriteBuffer(64<<10))
		send(t, p, "sized")
		mustGet(t, p.rx, "sized")
		errNeg := rx.SetReadBuffer(-1)
		require.NoError(t, p.rx.Close())
		closedErr(t, rx.SetReadBuffer(64<<10), "SetReadBuffer after Close")
		if s.rdma {
			differ(t, s, "a negative size is refused; net.UDPConn hands it to setsockopt, where Linux reads it as unsigned and grants net.core.rmem_max")
			require.ErrorContains(t, errNeg, "must not be negative")
			var op *net.OpError
			require.ErrorAs(t, errNeg, &op)
			return
		}
		require.NoError(t, errNeg)
	}},
	{"unicast UDP address", func(t *testing.T, s subject) {
		p := s.open(t)
		to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}
		n, err := p.tx.WriteTo([]byte("x"), to)
		if s.rdma {
			differ(t, s, "a non-multicast *net.UDPAddr is refused: unicast goes to a peer's *rdmanet.Addr (GID and QPN), which a UDP address cannot name")
			require.ErrorContains(t, err, "not a multicast group")
			var op *net.OpError
			require.ErrorAs(t, err, &op)
			return
		}
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}},
	{"group not joined", func(t *testing.T, s subject) {
		p := s.open(t)
		n, err := p.tx.WriteTo([]byte("x"), p.unjoin)
		if s.rdma {
			differ(t, s, "sending to a group needs a membership (at least send-only: rdma_cm gives the group's address handle at the join), so it fails with rdmanet.ErrNotJoined")
			require.ErrorContains(t, err, "not joined")
			var op *net.OpError
			require.ErrorAs(t, err, &op)
			return
		}
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}},
}

// TestConformance runs the table against net.UDPConn and against rdmanet
// on the backend under test, and logs the results table.
func TestConformance(t *testing.T) {
	subjects := []subject{udpSubject(), rdmanetSubject()}
	conformance.Lock()
	conformance.caseOf = map[string]string{}
	conformance.res = map[string]map[string]string{}
	conformance.Unlock()
	for _, s := range subjects {
		t.Run(s.name, func(t *testing.T) {
			for _, c := range conformanceCases {
				t.Run(c.name, func(t *testing.T) {
					conformance.Lock()
					conformance.caseOf[t.Name()] = c.name
					conformance.Unlock()
					t.Cleanup(func() {
						switch {
						case t.Failed():
							note(t, s, "FAIL")
						case t.Skipped():
							note(t, s, "n/a")
						default:
							note(t, s, "pass")
						}
					})
					c.run(t, s)
				})
			}
		})
	}
	t.Log("\n" + conformanceTable(subjects))
}

// conformanceTable is the results as a Markdown table, one line per case.
func conformanceTable(subjects []subject) string {
	conformance.Lock()
	defer conformance.Unlock()
	var b strings.Builder
	b.WriteString("CONFORMANCE | case |")
	for _, s := range subjects {
		b.WriteString(" " + s.name + " |")
	}
	b.WriteString("\n")
	names := make([]string, 0, len(conformanceCases))
	for _, c := range conformanceCases {
		names = append(names, c.name)
	}
	for _, n := range names {
		fmt.Fprintf(&b, "CONFORMANCE | %s |", n)
		for _, s := range subjects {
			o := conformance.res[n][s.name]
			if strings.HasPrefix(o, "differs") {
				o = "differs"
			}
			fmt.Fprintf(&b, " %s |", o)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// churnDeadlines moves deadlines for 300 ms, every millisecond, through
// the past, a millisecond ahead and none, with each of set.
func churnDeadlines(t *testing.T, set ...func(time.Time) error) {
	t.Helper()
	stop := time.Now().Add(300 * time.Millisecond)
	for i := 0; time.Now().Before(stop); i++ {
		var d time.Time
		switch i % 3 {
		case 0:
			d = time.Now().Add(-time.Second)
		case 1:
			d = time.Now().Add(time.Millisecond)
		}
		for _, f := range set {
			require.NoError(t, f(d))
		}
		time.Sleep(time.Millisecond)
	}
}
