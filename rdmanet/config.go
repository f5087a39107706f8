package rdmanet

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Backends.
const (
	BackendAuto     = "auto"      // rdma-core when an active RDMA port serves the address, else software
	BackendSoftware = "software"  // pure Go RoCEv2 over UDP sockets
	BackendRDMACore = "rdma-core" // libibverbs + librdmacm
)

// EnvBackend names the environment variable that overrides
// ListenConfig.Backend (and the default "auto") for every conn of the
// process: "software", "rdma-core" or "auto".
const EnvBackend = "RDMANET_BACKEND"

// ListenConfig holds options for listening. The zero value is ready to use:
// backend auto, loopback on, full-member join, default depths. A zero
// number takes the default; a negative one is an error, and so is one
// over the bound its comment gives: ListenMulticast refuses it with an
// error that names the field, its value and the bound. Each conn is one
// QP: see the package doc's Limits for what a conn costs and how many
// groups it can join.
type ListenConfig struct {
	// Backend is "auto" (or ""), "software" or "rdma-core"; other names
	// are refused. The RDMANET_BACKEND environment variable overrides it
	// (and is refused likewise). With "auto", a conn whose Device, Port
	// or address rdma-core cannot serve gets the software backend, and
	// an error binding there says why rdma-core was not taken.
	Backend string
	// LocalAddr, when set, is the local address to bind (as
	// rdma_bind_addr): it selects the netdev, device, port and GID. It
	// wins over the ifi passed to ListenMulticast.
	LocalAddr net.IP
	// Device and Port pin the RDMA device and port (rdma-core, or a
	// software sw-NETDEV device, port 1); they must agree with the
	// address. Devices lists the names. Port is at most 255.
	Device string
	Port   int
	// RecvDepth is the number of receive buffers kept posted; SendDepth
	// the number of sends in flight (default 256). Reads post the buffers
	// they consumed again in batches of a quarter of RecvDepth, at least
	// 1 and at most 32 (one post each), so up to a batch less one wait
	// unposted between reads. RecvDepth defaults to 512 on rdma-core,
	// where it is all the buffering a UD QP has, and to 64 on the
	// software backend, where the socket buffer holds datagrams until a
	// receive is posted and a short ring stays in cache. Each
	// slot takes MTU()+40 bytes (rounded up to 64) of mapped memory, a
	// send slot MTU() bytes. The device caps both (max_qp_wr, which
	// Device.MaxQPWR reports; 16384 on the software backend; a SendDepth
	// under 4 is raised to 4), and each ring is at most 1 GiB.
	RecvDepth int
	SendDepth int
	// DisableLoopback stops the conn from receiving its own multicast
	// messages (multicast loopback is on by default, as with UDP). Other
	// conns on the same host still receive them. SetMulticastLoopback
	// changes it later.
	DisableLoopback bool
	// SoftwareGRO turns on receive-side UDP GRO on the software backend:
	// a WriteBatch that a peer sent as one GSO run (equal datagrams to one
	// destination) arrives as one read and is split into its datagrams,
	// which moves batches several times faster. The cost: while GRO is on,
	// a run that a full socket buffer drops (the reader stopped reading
	// with receives posted) counts as one in Stats.Dropped[DropOverflow],
	// not one per datagram. Off by default; rdma-core ignores it.
	SoftwareGRO bool
	// SendOnly joins groups as a send-only member: the conn sends to the
	// group and receives nothing from it.
	SendOnly bool
	// QKey is the Q_Key of the QP and of group sends (default
	// 0x01234567, rdma_cm's RDMA_UDP_QKEY); any 32-bit value.
	QKey uint32
	// Spin is how long a read polls the completion queue before it arms
	// it and sleeps (default 0: sleep at once). Spinning trades CPU for
	// latency when messages arrive closely spaced. A window shorter than
	// the time to the next message only costs: after 4 spins in a row
	// that find nothing, reads skip spinning for 1, 2, 4 ... 64 reads
	// between tries, until a spin finds a message again. At most 100 ms:
	// past a few milliseconds a spin only burns the core it holds. A
	// spinning read still ends at its deadline and at Close.
	Spin time.Duration
	// MaxInline asks for inline sends up to this size (rdma-core; default
	// 256). At most 4096, and the device may give less.
	MaxInline int
}

// maxSpin is the longest ListenConfig.Spin: 100 ms. A spin pays for
// itself by saving a sleep and a wake-up, tens of microseconds, on a
// message that comes within the window; past a few milliseconds that
// saving is a rounding error beside the core the spin holds, and past
// 100 ms a window is a busy loop, not a latency trade.
const maxSpin = 100 * time.Millisecond

// Bounds of ListenConfig fields that no device sets (the depths' real
// limit is the device's max_qp_wr, which the QP's creation checks).
const (
	maxDepth     = 1<<31 - 1 // RecvDepth, SendDepth: the verbs' 32-bit fields
	maxInline    = 4096      // no UD payload is longer (the largest MTU)
	maxPort      = 255       // a port number is 8 bits
	maxRingBytes = 1 << 30   // the receive ring and the send ring, each
)

// validate rejects what no default can mean: negative depths, sizes,
// ports and spin windows, values over their bounds, and an unknown
// backend (in Backend or the RDMANET_BACKEND environment variable).
func (lc *ListenConfig) validate() error {
	for _, f := range []struct {
		name string
		v    int64
		max  int64
		fmt  func(int64) string
	}{
		{"RecvDepth", int64(lc.RecvDepth), maxDepth, nil},
		{"SendDepth", int64(lc.SendDepth), maxDepth, nil},
		{"MaxInline", int64(lc.MaxInline), maxInline, nil},
		{"Port", int64(lc.Port), maxPort, nil},
		{"Spin", int64(lc.Spin), int64(maxSpin), func(v int64) string { return time.Duration(v).String() }},
	} {
		show := func(v int64) string {
			if f.fmt != nil {
				return f.fmt(v)
			}
			return strconv.FormatInt(v, 10)
		}
		if f.v < 0 {
			return fmt.Errorf("rdmanet: ListenConfig.%s is %s: it must not be negative (0 takes the default)", f.name, show(f.v))
		}
		if f.v > f.max {
			return fmt.Errorf("rdmanet: ListenConfig.%s %s is over the limit %s", f.name, show(f.v), show(f.max))
		}
	}
	if env := os.Getenv(EnvBackend); env != "" && !knownBackend(env) {
		return fmt.Errorf("rdmanet: unknown backend %q in the environment variable %s=%q: want %s, %s or %s (it overrides ListenConfig.Backend)",
			env, EnvBackend, env, BackendAuto, BackendSoftware, BackendRDMACore)
	}
	if lc.Backend != "" && !knownBackend(lc.Backend) {
		return fmt.Errorf("rdmanet: ListenConfig.Backend: unknown backend %q: want %s (or \"\"), %s or %s",
			lc.Backend, BackendAuto, BackendSoftware, BackendRDMACore)
	}
	return nil
}

// knownBackend reports whether name is "auto" or a registered provider
// (software, rdma-core, and the tests' own).
func knownBackend(name string) bool {
	if name == BackendAuto {
		return true
	}
	_, err := verbs.Lookup(name)
	return err == nil
}

// withDefaults returns lc with its zero fields at the defaults: the one
// place rdmanet sets them (the depths start from the model's,
// verbs.DefaultSendDepth and verbs.DefaultRecvDepth; RecvDepth is set once
// the backend is known, by recvDepthFor).
func (lc *ListenConfig) withDefaults() ListenConfig {
	c := *lc
	if c.SendDepth <= 0 {
		c.SendDepth = verbs.DefaultSendDepth
	}
	c.SendDepth = max(c.SendDepth, signalShare) // else no send is signaled
	if c.QKey == 0 {
		c.QKey = verbs.DefaultQKey
	}
	if c.MaxInline == 0 {
		c.MaxInline = defaultMaxInline
	}
	if env := os.Getenv(EnvBackend); env != "" {
		c.Backend = env
	}
	if c.Backend == "" {
		c.Backend = BackendAuto
	}
	return c
}

// recvDepthFor is the receive ring depth when ListenConfig.RecvDepth is
// 0: the model's default on rdma-core, where the posted receives are all
// the buffering a UD QP has; 64 on the software backend, whose socket
// buffer holds datagrams until a receive is posted, and where a short
// ring stays in cache.
func recvDepthFor(provider string, depth int) int {
	switch {
	case depth > 0:
		return depth
	case provider == BackendSoftware:
		return 64
	}
	return verbs.DefaultRecvDepth
}

// chooseProvider picks the provider for cfg: the named one, or for "auto"
// rdma-core when it is available and an active port serves the address,
// else software; then fallback says why rdma-core was not taken.
func chooseProvider(backend string, bc verbs.BindConfig) (p verbs.Provider, fallback string, err error) {
	if backend == BackendAuto {
		rc, err := verbs.Lookup(BackendRDMACore)
		switch {
		case err != nil:
			fallback = "rdma-core was unavailable: " + err.Error()
		case rc.Available() != nil:
			fallback = "rdma-core was unavailable: " + rc.Available().Error()
		case rc.Serves(bc):
			return rc, "", nil
		default:
			fallback = "rdma-core has no active port that serves " + bindTarget(bc)
		}
		p, err = verbs.Lookup(BackendSoftware)
		return p, fallback, err
	}
	p, err = verbs.Lookup(backend)
	if err != nil {
		return nil, "", fmt.Errorf("rdmanet: unknown backend %q: want auto, software or rdma-core", backend)
	}
	if err := p.Available(); err != nil {
		return nil, "", err
	}
	return p, "", nil
}

// bindTarget says what a BindConfig asks for, for an error.
func bindTarget(bc verbs.BindConfig) string {
	var what []string
	if bc.Device != "" {
		what = append(what, "device "+strconv.Quote(bc.Device))
	}
	if bc.Port != 0 {
		what = append(what, "port "+strconv.Itoa(bc.Port))
	}
	switch {
	case bc.Addr != nil:
		what = append(what, "address "+bc.Addr.String())
	case bc.Interface != nil:
		what = append(what, "interface "+bc.Interface.Name)
	case len(what) == 0:
		what = append(what, "loopback")
	}
	return strings.Join(what, ", ")
}

// fallbackError is a software backend's Bind error under "auto": it says
// why rdma-core was not taken first.
type fallbackError struct {
	why string // why rdma-core was not taken: a clause
	err error  // the software backend's
}

func (e *fallbackError) Error() string {
	return fmt.Sprintf("rdmanet: backend auto fell back to the software backend (%s), which failed: %v", e.why, e.err)
}
func (e *fallbackError) Unwrap() error { return e.err }

// depthLimitError is a depth over the device's max_qp_wr.
type depthLimitError struct {
	field  string
	depth  int
	limit  int
	device string
	err    error // what creating the QP returned
}

func (e *depthLimitError) Error() string {
	return fmt.Sprintf("rdmanet: ListenConfig.%s %d is over the device's limit %d (max_qp_wr of %s)", e.field, e.depth, e.limit, e.device)
}
func (e *depthLimitError) Unwrap() error { return e.err }

// explainCreateQP turns a failed CreateQP into an error that names the
// ListenConfig field over the device's limit, where that was the cause.
func (c *Conn) explainCreateQP(err error) error {
	devs, derr := c.prov.Devices()
	if derr != nil {
		return err
	}
	for _, d := range devs {
		if d.Name != c.local.Device || d.MaxQPWR <= 0 {
			continue
		}
		if c.cfg.RecvDepth > d.MaxQPWR {
			return &depthLimitError{"RecvDepth", c.cfg.RecvDepth, d.MaxQPWR, d.Name, err}
		}
		if c.cfg.SendDepth > d.MaxQPWR {
			return &depthLimitError{"SendDepth", c.cfg.SendDepth, d.MaxQPWR, d.Name, err}
		}
	}
	if c.cfg.MaxInline > defaultMaxInline && errors.Is(err, errEINVAL) {
		// The device's inline limit is not reported before a QP asks
		// for it (rxe refuses 4096 with EINVAL).
		return &inlineLimitError{c.cfg.MaxInline, c.local.Device, err}
	}
	return err
}

// defaultMaxInline is ListenConfig.MaxInline's default.
const defaultMaxInline = 256

// inlineLimitError is a MaxInline the device refused when creating the QP.
type inlineLimitError struct {
	size   int
	device string
	err    error
}

func (e *inlineLimitError) Error() string {
	return fmt.Sprintf("rdmanet: ListenConfig.MaxInline %d is more than %s takes for inline sends (the default is %d): %v", e.size, e.device, defaultMaxInline, e.err)
}
func (e *inlineLimitError) Unwrap() error { return e.err }

// checkRings bounds the rings' mapped memory once the MTU is known:
// RecvDepth slots of MTU+40 and SendDepth of MTU (each rounded up to 64,
// as initRecv and initSend make them), each at most 1 GiB (the device's
// max_qp_wr bounds them first on every device known).
func (c *Conn) checkRings() error {
	mtu := uint64(c.MTU())
	for _, r := range []struct {
		name  string
		depth int
		slot  uint64
	}{
		{"RecvDepth", c.cfg.RecvDepth, recvSlotSize(mtu)},
		{"SendDepth", c.cfg.SendDepth, sendSlotSize(mtu)},
	} {
		hi, n := bits.Mul64(uint64(r.depth), r.slot)
		if hi != 0 || n > maxRingBytes {
			return fmt.Errorf("rdmanet: ListenConfig.%s %d takes %d-byte slots at MTU %d, over the limit of %d bytes (1 GiB) a ring", r.name, r.depth, r.slot, mtu, maxRingBytes)
		}
	}
	return nil
}

// ListenMulticast is like the package function ListenMulticast, with the
// options of lc. ctx bounds the group join. A negative depth, MaxInline,
// Port or Spin is an error.
func (lc *ListenConfig) ListenMulticast(ctx context.Context, network string, ifi *net.Interface, group *net.UDPAddr) (*Conn, error) {
	if err := lc.validate(); err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Addr: groupAddr(group), Err: err}
	}
	return listen(ctx, lc.withDefaults(), network, ifi, group)
}

// ListenMulticast returns a Conn joined to the multicast group, in the
// shape of net.ListenMulticastUDP: network is "rdma", "rdma4" or "rdma6";
// ifi selects the interface (and through it the RDMA device and port); a
// nil ifi means loopback, never "the interface of the default route".
//
// The group's Port has no meaning in RDMA multicast: RoCE v2 always uses
// UDP port 4791 and InfiniBand has no ports. It is ignored, so a UDP
// program switches by changing only the function and network names. A nil
// group listens without joining any (use JoinGroup, or unicast only).
func ListenMulticast(network string, ifi *net.Interface, group *net.UDPAddr) (*Conn, error) {
	var lc ListenConfig
	return lc.ListenMulticast(context.Background(), network, ifi, group)
}
