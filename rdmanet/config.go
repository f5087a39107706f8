package rdmanet

import (
	"context"
	"fmt"
	"net"
	"os"
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
// number takes the default; a negative one is an error. Each conn is one
// QP: see the package doc's Limits for what a conn costs and how many
// groups it can join.
type ListenConfig struct {
	// Backend is "auto" (or ""), "software" or "rdma-core". The
	// RDMANET_BACKEND environment variable overrides it.
	Backend string
	// LocalAddr, when set, is the local address to bind (as
	// rdma_bind_addr): it selects the netdev, device, port and GID. It
	// wins over the ifi passed to ListenMulticast.
	LocalAddr net.IP
	// Device and Port pin the RDMA device and port (rdma-core); they must
	// agree with the address.
	Device string
	Port   int
	// RecvDepth is the number of receive buffers kept posted; SendDepth
	// the number of sends in flight (default 256). RecvDepth defaults to
	// 512 on rdma-core, where it is all the buffering a UD QP has, and to
	// 64 on the software backend, where the socket buffer holds datagrams
	// until a receive is posted and a short ring stays in cache. Each
	// slot takes MTU()+40 bytes (rounded up to 64) of mapped memory, a
	// send slot MTU() bytes. The device caps both (max_qp_wr; 16384 on
	// the software backend).
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
	// 0x01234567, rdma_cm's RDMA_UDP_QKEY).
	QKey uint32
	// Spin is how long a read polls the completion queue before it arms
	// it and sleeps (default 0: sleep at once). Spinning trades CPU for
	// latency when messages arrive closely spaced. A window shorter than
	// the time to the next message only costs: after 4 spins in a row
	// that find nothing, reads skip spinning for 1, 2, 4 ... 64 reads
	// between tries, until a spin finds a message again.
	Spin time.Duration
	// MaxInline asks for inline sends up to this size (rdma-core; default
	// 256).
	MaxInline int
}

// validate rejects what no default can mean: negative depths, sizes,
// ports and spin windows.
func (lc *ListenConfig) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"RecvDepth", int64(lc.RecvDepth)},
		{"SendDepth", int64(lc.SendDepth)},
		{"MaxInline", int64(lc.MaxInline)},
		{"Port", int64(lc.Port)},
		{"Spin", int64(lc.Spin)},
	} {
		if f.v < 0 {
			return fmt.Errorf("rdmanet: ListenConfig.%s is %d: it must not be negative (0 takes the default)", f.name, f.v)
		}
	}
	return nil
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
	if c.SendDepth < 4 {
		c.SendDepth = 4
	}
	if c.QKey == 0 {
		c.QKey = verbs.DefaultQKey
	}
	if c.MaxInline == 0 {
		c.MaxInline = 256
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
// else software.
func chooseProvider(backend string, bc verbs.BindConfig) (verbs.Provider, error) {
	if backend == BackendAuto {
		if p, err := verbs.Lookup(BackendRDMACore); err == nil && p.Available() == nil && p.Serves(bc) {
			return p, nil
		}
		return verbs.Lookup(BackendSoftware)
	}
	p, err := verbs.Lookup(backend)
	if err != nil {
		return nil, fmt.Errorf("unknown backend %q: want auto, software or rdma-core", backend)
	}
	if err := p.Available(); err != nil {
		return nil, err
	}
	return p, nil
}

// ListenMulticast is like the package function ListenMulticast, with the
// options of lc. ctx bounds the group join. A negative depth, MaxInline,
// Port or Spin is an error.
func (lc *ListenConfig) ListenMulticast(ctx context.Context, network string, ifi *net.Interface, group *net.UDPAddr) (*Conn, error) {
	if err := lc.validate(); err != nil {
		var addr net.Addr
		if group != nil {
			addr = group
		}
		return nil, &net.OpError{Op: "listen", Net: network, Addr: addr, Err: err}
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
