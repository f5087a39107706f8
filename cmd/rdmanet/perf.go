//go:build linux

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-rdma/rdmanet/internal/perf"
)

const perfArgs = "pingpong|throughput [-size N] [-count N | -duration D] [-backend B] [-baseline udp] [-sender S] [-iface IF] [-bind ADDR] [-group G] [-role R] [-batch N] [-spin D] [-receivers N] [-rate R] [-rcvbuf N] [-json] [-progress D]"

const (
	defaultPerfGroup     = "239.255.77.1"
	defaultPingCount     = 10000
	defaultThroughCount  = 500000
	perfMinSize          = perf.SeqSize // the sequence number
	perfProgressAfter    = 2 * time.Second
	perfPingTimeout      = time.Second      // a round trip lost
	perfQuiet            = time.Second      // a receiver gives up after this
	perfFirstWait        = 10 * time.Second // in-process: the first message
	perfServerWait       = 10 * time.Second // client: the first answer
	perfDefaultRecvDepth = 2048
)

// Senders (-sender): how a run opens the conns that send.
const (
	// rdmanet: joined send-only, loopback off (the default).
	senderSendOnly = "send-only"
	// rdmanet: a plain ListenMulticast conn, full member with loopback on,
	// as a newcomer writes it: it also receives what it sends.
	senderMember = "member"
	// -baseline udp: net.DialUDP to the group + Write, as most Go
	// multicast senders (the default).
	senderConnected = "connected"
	// -baseline udp: one unconnected socket, WriteToUDP.
	senderUnconnected = "unconnected"
)

// perfConfig is a parsed `rdmanet perf` command line.
type perfConfig struct {
	mode      string // "pingpong" or "throughput"
	role      string // "" (both sides in this process), client/server, send/recv
	size      int
	count     uint64 // 0: run for duration
	duration  time.Duration
	backend   string
	baseline  string // "" or "udp"
	sender    string // senderSendOnly, senderMember, senderConnected or senderUnconnected
	iface     string
	bindIP    net.IP
	device    string
	group     *net.UDPAddr
	group2    *net.UDPAddr // pingpong answers
	batch     int
	spin      time.Duration
	receivers int
	rate      float64
	depth     int
	rcvbuf    int // UDP baseline receivers' SO_RCVBUF; 0: the system default
	json      bool
	progress  time.Duration
}

func runPerf(e *env, args []string) error {
	fs := newFlagSet(e, "perf", perfArgs)
	c := &perfConfig{}
	fs.IntVar(&c.size, "size", 64, "message size in bytes (at least 8: the first 8 carry a sequence number)")
	count := fs.Uint64("count", 0, fmt.Sprintf("messages (throughput) or round trips (pingpong); default %d / %d", defaultThroughCount, defaultPingCount))
	fs.DurationVar(&c.duration, "duration", 0, "run for this long instead of -count")
	fs.StringVar(&c.backend, "backend", "auto", "rdmanet backend: auto, software or rdma-core")
	fs.StringVar(&c.baseline, "baseline", "", `"udp": run the same test over net.UDPConn multicast on the same interface`)
	fs.StringVar(&c.sender, "sender", "", "how senders are opened: rdmanet send-only (default) or member (a plain ListenMulticast conn: full member, loopback on); -baseline udp connected (default: net.DialUDP + Write) or unconnected (WriteToUDP)")
	fs.StringVar(&c.iface, "iface", "", "interface (default: loopback; never another one unless named)")
	bind := fs.String("bind", "", "local IPv4 address to bind (selects netdev, RDMA device and port)")
	fs.StringVar(&c.device, "device", "", "RDMA device (rdma-core), must agree with -bind")
	group := fs.String("group", defaultPerfGroup, "multicast group (pingpong answers on the next address); IP or IP:port")
	fs.StringVar(&c.role, "role", "", "split across processes: client|server (pingpong), send|recv (throughput); default both here")
	fs.IntVar(&c.batch, "batch", 1, "throughput: messages per WriteBatch/ReadBatch call (1: WriteTo/ReadFrom)")
	fs.DurationVar(&c.spin, "spin", 0, "rdmanet receive spin window (ListenConfig.Spin)")
	fs.IntVar(&c.receivers, "receivers", 1, "throughput: receiving conns in this process (loss per receiver)")
	fs.Float64Var(&c.rate, "rate", 0, "throughput: pace the sender to this many msgs/s (0: flat out)")
	fs.IntVar(&c.depth, "depth", perfDefaultRecvDepth, "rdmanet receive buffers posted per receiving conn (ListenConfig.RecvDepth)")
	fs.IntVar(&c.rcvbuf, "rcvbuf", perf.SocketBuffer, "-baseline udp: receive socket buffer (SO_RCVBUF) in bytes, by default what the software backend asks for its sockets; 0: the system default")
	fs.BoolVar(&c.json, "json", false, "print one JSON object instead of the table")
	fs.DurationVar(&c.progress, "progress", time.Second, "progress line interval on stderr for runs longer than 2s (0: none)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := c.validate(pos, set, *count, *bind, *group); err != nil {
		return err
	}
	res, err := c.run(e)
	if err != nil {
		return err
	}
	if c.json {
		enc := json.NewEncoder(e.stdout)
		return enc.Encode(res)
	}
	return res.writeText(e.stdout)
}

func (c *perfConfig) validate(pos []string, set map[string]bool, count uint64, bind, group string) error {
	if len(pos) == 0 {
		return usagef("no mode given: pingpong or throughput")
	}
	if len(pos) > 1 {
		return usagef("unexpected argument %q", pos[1])
	}
	c.mode = pos[0]
	switch c.mode {
	case "pingpong":
		if c.role != "" && c.role != "client" && c.role != "server" {
			return usagef("bad -role %q: pingpong takes client or server", c.role)
		}
		if c.batch != 1 {
			return usagef("-batch applies to throughput only")
		}
		if set["receivers"] {
			return usagef("-receivers applies to throughput only")
		}
		if set["rate"] {
			return usagef("-rate applies to throughput only")
		}
	case "throughput":
		if c.role != "" && c.role != "send" && c.role != "recv" {
			return usagef("bad -role %q: throughput takes send or recv", c.role)
		}
	default:
		return usagef("unknown mode %q: want pingpong or throughput", c.mode)
	}
	if c.size < perfMinSize || c.size > 65507 {
		return usagef("bad -size %d: want %d to 65507 bytes", c.size, perfMinSize)
	}
	if set["count"] && set["duration"] {
		return usagef("-count and -duration exclude each other")
	}
	switch {
	case set["count"]:
		if count == 0 {
			return usagef("bad -count 0: want at least 1")
		}
		c.count = count
	case set["duration"]:
		if c.duration <= 0 {
			return usagef("bad -duration %v: want more than 0", c.duration)
		}
	case c.mode == "pingpong":
		c.count = defaultPingCount
	default:
		c.count = defaultThroughCount
	}
	switch c.backend {
	case "auto", "software", "rdma-core":
	default:
		return usagef("bad -backend %q: want auto, software or rdma-core", c.backend)
	}
	switch c.baseline {
	case "":
	case "udp":
		if set["backend"] {
			return usagef("-baseline udp runs over net.UDPConn: drop -backend")
		}
		if set["spin"] || set["device"] || set["depth"] {
			return usagef("-spin, -device and -depth apply to rdmanet conns, not to -baseline udp")
		}
	default:
		return usagef("bad -baseline %q: the only baseline is udp", c.baseline)
	}
	switch {
	case c.sender == "" && c.baseline == "udp":
		c.sender = senderConnected
	case c.sender == "":
		c.sender = senderSendOnly
	case c.baseline == "udp" && c.sender != senderConnected && c.sender != senderUnconnected:
		return usagef("bad -sender %q: -baseline udp takes connected or unconnected", c.sender)
	case c.baseline == "" && c.sender != senderSendOnly && c.sender != senderMember:
		return usagef("bad -sender %q: rdmanet takes send-only or member (connected and unconnected are for -baseline udp)", c.sender)
	}
	if c.role == "recv" && set["sender"] {
		return usagef("-sender does not apply to -role recv")
	}
	if bind != "" {
		a, err := netip.ParseAddr(bind)
		if err != nil || !a.Is4() {
			return usagef("bad -bind %q: want an IPv4 address", bind)
		}
		c.bindIP = net.IP(a.AsSlice())
	}
	g, err := parseGroup(group)
	if err != nil {
		return err
	}
	c.group = g
	ga := netip.AddrFrom4([4]byte(g.IP.To4()))
	g2 := ga.Next()
	if !g2.IsMulticast() {
		return usagef("bad -group %s: pingpong answers on the next address, which is not multicast", group)
	}
	c.group2 = &net.UDPAddr{IP: net.IP(g2.AsSlice()), Port: g.Port}
	if c.batch < 1 || c.batch > 1024 {
		return usagef("bad -batch %d: want 1 to 1024", c.batch)
	}
	if c.spin < 0 {
		return usagef("bad -spin %v: want 0 or more", c.spin)
	}
	if c.receivers < 1 || c.receivers > 64 {
		return usagef("bad -receivers %d: want 1 to 64", c.receivers)
	}
	if c.role == "send" && set["receivers"] {
		return usagef("-receivers does not apply to -role send")
	}
	if c.rate < 0 {
		return usagef("bad -rate %v: want 0 (flat out) or more", c.rate)
	}
	if set["rcvbuf"] && c.baseline != "udp" {
		return usagef("-rcvbuf applies to -baseline udp (the software backend's sockets always ask for %d bytes)", perf.SocketBuffer)
	}
	if c.rcvbuf < 0 {
		return usagef("bad -rcvbuf %d: want 0 (system default) or more", c.rcvbuf)
	}
	if c.depth < 1 {
		return usagef("bad -depth %d: want at least 1", c.depth)
	}
	if c.progress < 0 {
		return usagef("bad -progress %v: want 0 or more", c.progress)
	}
	return nil
}

func parseGroup(s string) (*net.UDPAddr, error) {
	host, port := s, 7700
	if ap, err := netip.ParseAddrPort(s); err == nil {
		host, port = ap.Addr().String(), int(ap.Port())
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is4() {
		return nil, usagef("bad -group %q: want an IPv4 multicast address, e.g. %s", s, defaultPerfGroup)
	}
	if !a.IsMulticast() {
		return nil, usagef("bad -group %q: not a multicast address", s)
	}
	return &net.UDPAddr{IP: net.IP(a.AsSlice()), Port: port}, nil
}

// perfReceiver is one receiver's throughput result.
type perfReceiver struct {
	Received uint64  `json:"received"`
	Expected uint64  `json:"expected"`
	LossPct  float64 `json:"loss_pct"`
	MsgsPerS float64 `json:"msgs_per_s"`
	GbitPerS float64 `json:"gbit_per_s"`
	Bad      uint64  `json:"bad"` // too short to carry a sequence number
}

// perfResult is what a run prints: as a table, or as one JSON object.
type perfResult struct {
	Mode      string         `json:"mode"`
	Role      string         `json:"role"`
	Backend   string         `json:"backend"`
	Device    string         `json:"device"`
	Group     string         `json:"group"`
	Size      int            `json:"size"`
	Count     uint64         `json:"count"`      // messages sent, or round trips measured
	Duration  float64        `json:"duration_s"` // of the measured part
	MsgsPerS  float64        `json:"msgs_per_s"` // throughput: per receiver, mean; pingpong: round trips/s
	GbitPerS  float64        `json:"gbit_per_s"` // payload bits
	SendPerS  float64        `json:"send_msgs_per_s"`
	LossPct   []float64      `json:"loss_pct"`
	Receivers []perfReceiver `json:"receivers"`
	Lost      uint64         `json:"lost"` // pingpong: round trips that timed out
	MinNs     int64          `json:"min_ns"`
	MeanNs    int64          `json:"mean_ns"`
	P50Ns     int64          `json:"p50_ns"`
	P90Ns     int64          `json:"p90_ns"`
	P99Ns     int64          `json:"p99_ns"`
	P999Ns    int64          `json:"p999_ns"`
	MaxNs     int64          `json:"max_ns"`
	Histogram []perf.Bucket  `json:"histogram"`
	SpinNs    int64          `json:"spin_ns"`
	Batch     int            `json:"batch"`
	Rate      float64        `json:"rate"`
	Baseline  string         `json:"baseline"`
	Sender    string         `json:"sender"`
	// RcvBuf is SO_RCVBUF of the receivers' sockets as getsockopt reports
	// it (twice what the kernel granted, for its overhead); 0 where a
	// receiver has no socket (rdma-core: the ring is the buffer).
	RcvBuf  int     `json:"rcvbuf"`
	RmemMax int     `json:"rmem_max"` // net.core.rmem_max, which caps SO_RCVBUF
	CPUPct  float64 `json:"cpu_pct"`  // process CPU time / wall time of the measured part
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// run opens the conns and runs the mode.
func (c *perfConfig) run(e *env) (*perfResult, error) {
	pn := &perfNet{cfg: c}
	if c.iface != "" {
		ifi, err := net.InterfaceByName(c.iface)
		if err != nil {
			return nil, usagef("bad -iface %q: %v", c.iface, err)
		}
		pn.ifi = ifi
	} else if c.baseline == "udp" && c.bindIP != nil {
		ifi, err := interfaceOf(c.bindIP)
		if err != nil {
			return nil, err
		}
		pn.ifi = ifi
	}
	res := &perfResult{Mode: c.mode, Role: c.role, Group: c.group.IP.String(), Size: c.size,
		SpinNs: int64(c.spin), Batch: c.batch, Rate: c.rate, Baseline: c.baseline, Sender: c.sender,
		LossPct: []float64{}, Receivers: []perfReceiver{}, Histogram: []perf.Bucket{}}
	if res.Role == "" {
		res.Role = "both"
	}
	if c.mode == "pingpong" {
		res.Group += "," + c.group2.IP.String()
	}
	var err error
	if c.mode == "pingpong" {
		err = c.pingpong(e, pn, res)
	} else {
		err = c.throughput(e, pn, res)
	}
	res.Backend, res.Device, res.RcvBuf = pn.backend, pn.device, pn.rcvbuf
	res.RmemMax = rmemMax()
	if err != nil {
		return nil, err
	}
	return res, nil
}

// rmemMax is net.core.rmem_max of this network namespace, 0 if unknown.
func rmemMax() int {
	b, err := os.ReadFile("/proc/sys/net/core/rmem_max")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// interfaceOf finds the interface that holds ip.
func interfaceOf(ip net.IP) (*net.Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for i := range ifs {
		addrs, _ := ifs[i].Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return &ifs[i], nil
			}
		}
	}
	return nil, usagef("bad -bind %s: no interface has this address", ip)
}

// checkSize refuses a -size the conn cannot carry in one datagram.
func (c *perfConfig) checkSize(ep perf.Endpoint) error {
	if c.size > ep.MTU() {
		return usagef("bad -size %d: larger than the MTU %d of the conn", c.size, ep.MTU())
	}
	return nil
}

// progress prints a line to stderr every c.progress once the run has
// lasted perfProgressAfter, until stop is closed.
func (c *perfConfig) startProgress(e *env, line func(el time.Duration) string) (stop func()) {
	if c.progress <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	exited := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(exited)
		t := time.NewTicker(c.progress)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if el := time.Since(start); el >= perfProgressAfter {
					fmt.Fprintf(e.stderr, "perf %s: %5.1fs  %s\n", c.mode, el.Seconds(), line(el))
				}
			}
		}
	}()
	return func() { close(done); <-exited }
}

func (r *perfResult) writeText(w interface{ Write([]byte) (int, error) }) error {
	t := newTable(w)
	fmt.Fprintf(t, "mode\t%s (%s)\n", r.Mode, r.Role)
	be := r.Backend
	if r.Baseline != "" {
		be = "net.UDPConn multicast (baseline " + r.Baseline + ")"
	}
	fmt.Fprintf(t, "backend\t%s\n", be)
	fmt.Fprintf(t, "device\t%s\n", r.Device)
	fmt.Fprintf(t, "group\t%s\n", r.Group)
	fmt.Fprintf(t, "size\t%d B\n", r.Size)
	if r.Role != "recv" {
		fmt.Fprintf(t, "sender\t%s\n", r.Sender)
	}
	if r.Role != "send" {
		rb := "none: the receive ring is the buffer"
		if r.RcvBuf > 0 {
			rb = fmt.Sprintf("%d B (getsockopt SO_RCVBUF: twice the grant)", r.RcvBuf)
		}
		fmt.Fprintf(t, "rcvbuf\t%s; net.core.rmem_max %d\n", rb, r.RmemMax)
	}
	if r.Mode == "pingpong" {
		fmt.Fprintf(t, "round trips\t%d (%d lost)\n", r.Count, r.Lost)
	} else {
		fmt.Fprintf(t, "batch\t%d\n", r.Batch)
		rate := "flat out"
		if r.Rate > 0 {
			rate = fmtCount(r.Rate) + " msgs/s"
		}
		fmt.Fprintf(t, "rate\t%s\n", rate)
		if r.Role != "recv" {
			fmt.Fprintf(t, "sent\t%d (%s msgs/s)\n", r.Count, fmtCount(r.SendPerS))
		}
	}
	fmt.Fprintf(t, "duration\t%.3fs\n", r.Duration)
	if r.Baseline == "" {
		fmt.Fprintf(t, "spin\t%v\n", time.Duration(r.SpinNs))
	}
	fmt.Fprintf(t, "cpu\t%.0f%% (process CPU time / wall time)\n", r.CPUPct)
	if r.Mode == "pingpong" {
		fmt.Fprintf(t, "round trips/s\t%s\n", fmtCount(r.MsgsPerS))
	}
	t.Flush()
	if r.Mode == "throughput" && len(r.Receivers) > 0 {
		fmt.Fprintln(w)
		t = newTable(w)
		fmt.Fprintf(t, "receiver\treceived\texpected\tloss\tmsgs/s\tGbit/s\n")
		for i, rc := range r.Receivers {
			fmt.Fprintf(t, "%d\t%d\t%d\t%.3f%%\t%s\t%.3f\n", i+1, rc.Received, rc.Expected, rc.LossPct, fmtCount(rc.MsgsPerS), rc.GbitPerS)
		}
		t.Flush()
	}
	if r.Mode == "pingpong" && r.Role != "server" && r.Count > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "half round trip latency")
		t = newTable(w)
		for _, p := range []struct {
			name string
			v    int64
		}{{"min", r.MinNs}, {"mean", r.MeanNs}, {"p50", r.P50Ns}, {"p90", r.P90Ns}, {"p99", r.P99Ns}, {"p99.9", r.P999Ns}, {"max", r.MaxNs}} {
			fmt.Fprintf(t, "  %s\t%s\n", p.name, fmtDur(p.v))
		}
		t.Flush()
		fmt.Fprintln(w)
		writeHistogram(w, r.Histogram, 40)
	}
	return nil
}

func perfStderr(e *env, format string, args ...any) {
	if e.stderr != nil {
		fmt.Fprintf(e.stderr, format, args...)
	}
}
