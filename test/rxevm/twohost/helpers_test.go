//go:build linux

package twohost

// The helper roles: this test binary, run on the peer VM by its agent with
// RDMANET_TWOHOST_HELPER=role and the role's flags as arguments. Each
// prints READY once its conns are listening and RESULT lines at the end.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/internal/perf"
	"github.com/go-rdma/rdmanet/internal/poller"
	"github.com/go-rdma/rdmanet/internal/verbs/rdmacore"
	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/go-rdma/rdmanet/test/rxevm/peer"
	"github.com/stretchr/testify/require"
)

const envHelper = "RDMANET_TWOHOST_HELPER"

// envEagerDrain=1 gives a helper's conns the eager drain pattern
// (poller.SetEagerDrain): the benchmark's eager-drain rows.
const envEagerDrain = "RDMANET_TWOHOST_EAGER_DRAIN"

func TestMain(m *testing.M) {
	if role := os.Getenv(envHelper); role != "" {
		if os.Getenv(envEagerDrain) == "1" {
			poller.SetEagerDrain(true)
		}
		os.Exit(helperMain(role, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// helperFlags are the flags every role takes.
type helperFlags struct {
	backend string
	bind    string
	group   string
	reply   string // echo: "unicast" or a group to answer on
	conns   int
	n       int
	size    int
	batch   int
	depth   int
	spin    time.Duration
	gap     time.Duration
	idle    time.Duration
	// rate: a CPU profile of the receiving loop, printed base64 as
	// PPROF lines after RESULT.
	cpuprofile bool
	// echo: answer through a second, send-only conn joined to the reply
	// group, so the answering conn is no member of it.
	sendConn bool
}

func (h *helperFlags) listen(group *net.UDPAddr, sendOnly bool) (*rdmanet.Conn, error) {
	lc := rdmanet.ListenConfig{Backend: h.backend, LocalAddr: net.ParseIP(h.bind),
		DisableLoopback: true, SendOnly: sendOnly, RecvDepth: h.depth, Spin: h.spin}
	return lc.ListenMulticast(context.Background(), "rdma", nil, group)
}

func helperMain(role string, args []string) int {
	var h helperFlags
	fs := flag.NewFlagSet(role, flag.ContinueOnError)
	fs.StringVar(&h.backend, "backend", rdmanet.BackendRDMACore, "")
	fs.StringVar(&h.bind, "bind", os.Getenv("RDMANET_TEST_ADDR"), "")
	fs.StringVar(&h.group, "group", "", "")
	fs.StringVar(&h.reply, "reply", "unicast", "")
	fs.IntVar(&h.conns, "conns", 1, "")
	fs.IntVar(&h.n, "n", 100, "")
	fs.IntVar(&h.size, "size", 64, "")
	fs.IntVar(&h.batch, "batch", 1, "")
	fs.IntVar(&h.depth, "depth", 0, "")
	fs.DurationVar(&h.spin, "spin", 0, "")
	fs.DurationVar(&h.gap, "gap", time.Millisecond, "")
	fs.DurationVar(&h.idle, "idle", 5*time.Second, "")
	fs.BoolVar(&h.cpuprofile, "cpuprofile", false, "")
	fs.BoolVar(&h.sendConn, "sendconn", false, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var err error
	switch role {
	case "recv":
		err = helperRecv(&h)
	case "send":
		err = helperSend(&h)
	case "echo":
		err = helperEcho(&h)
	case "ping":
		err = helperPing(&h)
	case "sink":
		err = helperSink(&h)
	case "rate":
		err = helperRate(&h)
	case "udpecho":
		err = helperUDPEcho(&h)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Printf("ERROR %s: %v\n", role, err)
		return 1
	}
	return 0
}

// message fills b with sequence number seq and a pattern derived from it.
func message(b []byte, seq uint64) {
	binary.BigEndian.PutUint64(b, seq)
	for i := 8; i < len(b); i++ {
		b[i] = byte(seq + uint64(i))
	}
}

// checkMessage returns the sequence number of a message made by message,
// or an error.
func checkMessage(b []byte) (uint64, error) {
	if len(b) < 8 {
		return 0, fmt.Errorf("message of %d bytes", len(b))
	}
	seq := binary.BigEndian.Uint64(b)
	for i := 8; i < len(b); i++ {
		if b[i] != byte(seq+uint64(i)) {
			return seq, fmt.Errorf("message %d: byte %d is %#x, want %#x", seq, i, b[i], byte(seq+uint64(i)))
		}
	}
	return seq, nil
}

// recvResult is what one receiving conn got.
type recvResult struct {
	Got, Dup, Bad int
	From          string // the senders' addresses, sorted
}

// receive reads messages until want unique ones arrived or nothing came for
// idle.
func receive(c *rdmanet.Conn, want int, idle time.Duration) recvResult {
	seen := map[uint64]bool{}
	from := map[string]bool{}
	var r recvResult
	buf := make([]byte, 4096)
	for r.Got < want {
		c.SetReadDeadline(time.Now().Add(idle))
		n, a, err := c.ReadFromAddr(buf)
		if err != nil {
			break
		}
		seq, err := checkMessage(buf[:n])
		switch {
		case err != nil:
			r.Bad++
		case seen[seq]:
			r.Dup++
		default:
			seen[seq] = true
			r.Got++
		}
		from[a.IP().String()] = true
	}
	for f := range from {
		r.From += f + " "
	}
	r.From = strings.TrimSpace(sortWords(r.From))
	return r
}

func sortWords(s string) string {
	w := strings.Fields(s)
	sort.Strings(w)
	return strings.Join(w, " ")
}

// helperRecv: -conns conns joined to -group, each reading -n messages.
func helperRecv(h *helperFlags) error {
	g := &net.UDPAddr{IP: net.ParseIP(h.group)}
	cs := make([]*rdmanet.Conn, h.conns)
	for i := range cs {
		c, err := h.listen(g, false)
		if err != nil {
			return err
		}
		defer c.Close()
		cs[i] = c
	}
	fmt.Println("READY")
	var wg sync.WaitGroup
	res := make([]recvResult, len(cs))
	for i, c := range cs {
		wg.Go(func() { res[i] = receive(c, h.n, h.idle) })
	}
	wg.Wait()
	for i, r := range res {
		fmt.Printf("RESULT conn=%d got=%d dup=%d bad=%d from=%s\n", i, r.Got, r.Dup, r.Bad, r.From)
	}
	return nil
}

// send sends n messages of size bytes to dst, gap apart.
func send(c *rdmanet.Conn, dst net.Addr, n, size int, gap time.Duration) error {
	b := make([]byte, size)
	for i := 0; i < n; i++ {
		message(b, uint64(i))
		if _, err := c.WriteTo(b, dst); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	return nil
}

// helperSend: -n messages of -size bytes to -group, -gap apart.
func helperSend(h *helperFlags) error {
	g := &net.UDPAddr{IP: net.ParseIP(h.group)}
	c, err := h.listen(g, true)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("READY")
	if err := send(c, g, h.n, h.size, h.gap); err != nil {
		return err
	}
	fmt.Printf("SENT %d from=%v\n", h.n, c.LocalAddr())
	return nil
}

// interrupted is closed on SIGINT or SIGTERM (the agent's Stop).
func interrupted() <-chan os.Signal {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	return sig
}

// helperEcho answers every datagram on -group with the same bytes, to the
// sender (-reply unicast) or to the group -reply names, until interrupted.
func helperEcho(h *helperFlags) error {
	g := &net.UDPAddr{IP: net.ParseIP(h.group)}
	c, err := h.listen(g, false)
	if err != nil {
		return err
	}
	defer c.Close()
	var to net.Addr
	out := c
	if h.reply != "unicast" {
		rg := &net.UDPAddr{IP: net.ParseIP(h.reply)}
		if h.sendConn {
			if out, err = h.listen(rg, true); err != nil {
				return err
			}
			defer out.Close()
		} else if err := c.JoinGroup(nil, rg); err != nil {
			return err
		}
		to = rg
	}
	buf := make([]byte, 4096)
	return echoUntilInterrupted(fmt.Sprintf("READY %v", c.LocalAddr()), c, func() error {
		k, from, err := c.ReadFromAddr(buf)
		if err != nil {
			return err
		}
		dst := to
		if dst == nil {
			dst = &from
		}
		_, err = out.WriteTo(buf[:k], dst)
		return err
	})
}

// helperUDPEcho answers every datagram to -bind's UDP port with the same
// bytes, on a plain net.UDPConn, until interrupted: the Go program a user
// would write without rdmanet, the echo of the UDP floor rows (bench_test.go).
// READY prints the port.
func helperUDPEcho(h *helperFlags) error {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(h.bind)})
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, 65536)
	return echoUntilInterrupted(fmt.Sprintf("READY %d", c.LocalAddr().(*net.UDPAddr).Port), c, func() error {
		k, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return err
		}
		_, err = c.WriteToUDPAddrPort(buf[:k], from)
		return err
	})
}

// echoUntilInterrupted is an echo role's life: step (one datagram read
// and answered) in a loop on a goroutine of its own, ready printed once it
// runs, until interrupted (c closed, which ends the loop; then ECHOED and
// the count) or until step fails (its error).
func echoUntilInterrupted(ready string, c io.Closer, step func() error) error {
	stop := interrupted()
	done := make(chan error, 1)
	n := 0
	go func() {
		for {
			if err := step(); err != nil {
				done <- err
				return
			}
			n++
		}
	}()
	fmt.Println(ready)
	select {
	case <-stop:
		c.Close()
		<-done
	case err := <-done:
		return err
	}
	fmt.Printf("ECHOED %d\n", n)
	return nil
}

// helperPing sends -n requests to -group, each waiting up to 2 s for its
// unicast answer.
func helperPing(h *helperFlags) error {
	g := &net.UDPAddr{IP: net.ParseIP(h.group)}
	c, err := h.listen(g, true)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("READY")
	res := ping(c, g, h.n, h.size, 2*time.Second)
	fmt.Printf("RESULT got=%d bad=%d from=%s\n", res.Got, res.Bad, res.From)
	return nil
}

// pingResult is what ping saw.
type pingResult struct {
	Got, Bad int
	From     string // the answers' sender IPs
}

// ping sends n requests to dst one at a time and waits up to wait for each
// answer with the same sequence number.
func ping(c *rdmanet.Conn, dst net.Addr, n, size int, wait time.Duration) pingResult {
	return pingVia(c, c, dst, n, size, wait)
}

// pingVia is ping with the requests sent through tx and the answers read
// from c.
func pingVia(c, tx *rdmanet.Conn, dst net.Addr, n, size int, wait time.Duration) pingResult {
	var r pingResult
	from := map[string]bool{}
	b := make([]byte, size)
	in := make([]byte, 4096)
	for i := 0; i < n; i++ {
		message(b, uint64(i))
		t0 := time.Now()
		if _, err := tx.WriteTo(b, dst); err != nil {
			r.Bad++
			continue
		}
		c.SetReadDeadline(t0.Add(wait))
		for {
			k, a, err := c.ReadFromAddr(in)
			if err != nil {
				break // lost
			}
			seq, err := checkMessage(in[:k])
			if err != nil || k != size {
				r.Bad++
				continue
			}
			if seq != uint64(i) {
				continue // a late answer to an earlier request
			}
			r.Got++
			from[a.IP().String()] = true
			break
		}
	}
	for f := range from {
		r.From += f + " "
	}
	r.From = sortWords(r.From)
	return r
}

// helperSink joins -group with -depth receives posted and reads nothing
// until "drain" arrives on stdin; then it reads what the ring holds and
// prints its count and the conn's Stats as JSON.
func helperSink(h *helperFlags) error {
	g := &net.UDPAddr{IP: net.ParseIP(h.group)}
	c, err := h.listen(g, false)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("READY")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() && sc.Text() != "drain" {
	}
	r := receive(c, 1<<30, h.idle)
	st, _ := json.Marshal(c.Stats())
	fmt.Printf("RESULT got=%d dup=%d bad=%d\nSTATS %s\n", r.Got, r.Dup, r.Bad, st)
	return nil
}

// helperRate counts what arrives on -group or at its conn's own address
// (READY prints it) -batch at a time (perf.Receiver: 1 with ReadFromAddr,
// more with ReadBatch), and prints the receive rate from the first to the
// last message once nothing came for -idle, or -n arrived. Per read the
// loop takes the clock once and moves the idle deadline at most every
// idle/4 (under TCG a deadline costs several microseconds: perftest's
// receiver pays nothing like it). Nothing within 60 s fails the role.
func helperRate(h *helperFlags) error {
	g := &net.UDPAddr{IP: net.ParseIP(h.group)}
	c, err := h.listen(g, false)
	if err != nil {
		return err
	}
	defer c.Close()
	rx, err := perf.NewRDMA(c, nil)
	if err != nil {
		return err
	}
	var prof bytes.Buffer
	if h.cpuprofile {
		if err := pprof.StartCPUProfile(&prof); err != nil {
			return err
		}
	}
	var before procThreads
	var crossed uint64
	diag := os.Getenv("RDMANET_TEST_BENCH_DIAG") != ""
	r := perf.Receiver{Size: 4096, Batch: h.batch, Limit: uint64(h.n), Quiet: h.idle, FirstWait: 60 * time.Second}
	if diag {
		r.OnFirst = func() { before, crossed = threadSnapshot(), rdmacore.Crossings() }
	}
	fmt.Printf("READY %v\n", c.LocalAddr())
	var tl perf.RxTally
	if err := r.Run(rx, &tl); err != nil {
		return err
	}
	el := tl.Last.Sub(tl.First)
	if diag && before != nil {
		diagSince("rate-receiver", before, int(tl.Received), el)
		fmt.Printf("RXEVM-DIAG rate-receiver crossings/msg=%.3f\n", float64(rdmacore.Crossings()-crossed)/float64(tl.Received))
		st := c.Stats()
		fmt.Printf("RXEVM-DIAG rate-receiver stats %+v\n", st)
	}
	// The messages after the first read, over the time they took.
	fmt.Printf("RESULT got=%d secs=%.3f msgs_per_s=%.0f\n", tl.Received, el.Seconds(), perf.Rate(tl.Received-tl.FirstRead, el))
	if h.cpuprofile {
		pprof.StopCPUProfile()
		printBase64("PPROF", prof.Bytes())
	}
	return nil
}

// printBase64 prints b base64-encoded, 76 characters a line, each line
// prefix and a space first: the way out of the VM for a profile.
func printBase64(prefix string, b []byte) {
	b64 := base64.StdEncoding.EncodeToString(b)
	for len(b64) > 0 {
		k := min(len(b64), 76)
		fmt.Printf("%s %s\n", prefix, b64[:k])
		b64 = b64[k:]
	}
}

// --- the test side --------------------------------------------------------------

// helperOnPeer starts a helper role on the peer (in the software backend's
// namespace when ns is set) and waits for its READY line; it is stopped
// when the test ends.
func (s *site) helperOnPeer(t *testing.T, name, role, ns string, args ...string) peer.Result {
	t.Helper()
	argv := append([]string{os.Args[0]}, args...)
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	env := append([]string{envHelper + "=" + role}, s.helperEnv...)
	for _, k := range []string{"RDMANET_TEST_SYSMON_SLACK", "RDMANET_TEST_SYSMON_KEEPER", "RDMANET_TEST_BENCH_DIAG"} { // sysmon_test.go, bench_test.go
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	_, err := s.agent.Start(peer.StartRequest{Name: name, Argv: argv, Env: env, Stdin: role == "sink"})
	require.NoError(t, err)
	t.Cleanup(func() { s.agent.Stop(name) })
	r, err := s.agent.Wait(name, "READY", 60*time.Second)
	require.NoError(t, err)
	require.True(t, r.Matched, "peer helper %s (%s) not READY:\n%s", name, role, r.Output)
	return r
}

// waitPeer waits for a helper on the peer to exit by itself and returns
// its output; it fails the test if the helper failed.
func (s *site) waitPeer(t *testing.T, name string, timeout time.Duration) peer.Result {
	t.Helper()
	r, err := s.agent.Wait(name, "", timeout)
	require.NoError(t, err)
	require.True(t, r.Exited, "peer helper %s still running after %v:\n%s", name, timeout, r.Output)
	require.Equal(t, 0, r.Code, "peer helper %s:\n%s", name, r.Output)
	return r
}

// field returns the value of key=value in line, or "".
func field(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
