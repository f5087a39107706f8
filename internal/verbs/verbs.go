package verbs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/go-rdma/rdmanet/internal/infiniband"
)

// Well-known values of UD multicast.
const (
	// DefaultQKey is rdma_cm's Q_Key for the UDP port space (RDMA_UDP_QKEY).
	DefaultQKey uint32 = 0x01234567
	// GRHSize is the size of the Global Route Header area that starts
	// every UD receive buffer, whether or not the packet carried a GRH.
	GRHSize = 40
)

// Errors shared by the providers. Providers wrap them with the verb that
// failed (for example "ibv_post_send: %w"), so test with errors.Is.
var (
	// ErrUnavailable means the provider cannot run on this machine
	// (rdma-core not installed, built with CGO_ENABLED=0, no device).
	ErrUnavailable = errors.New("verbs: provider unavailable")
	// ErrNoDevice means no device or port serves the requested interface
	// or address.
	ErrNoDevice = errors.New("verbs: no RDMA device serves that address")
	// ErrNotSupported means the device or provider does not support the
	// operation (EOPNOTSUPP, ENOTSUPP).
	ErrNotSupported = errors.New("verbs: operation not supported")
	// ErrMessageSize means a send is larger than the path MTU.
	ErrMessageSize = errors.New("verbs: message longer than the path MTU")
	// ErrQueueFull means a post found no room in the work queue.
	ErrQueueFull = errors.New("verbs: work queue full")
	// ErrGroupLimit means a join would pass a multicast membership limit
	// (the software provider's net.ipv4.igmp_max_memberships per QP; a
	// device's max_mcast_grp or max_mcast_qp_attach). The error says
	// which, its value and how to raise it.
	ErrGroupLimit = errors.New("verbs: multicast group limit reached")
	// ErrDeviceRemoved means the device went away (DEVICE_REMOVAL).
	ErrDeviceRemoved = errors.New("verbs: device removed")
	// ErrClosed means the object was closed.
	ErrClosed = errors.New("verbs: use of closed object")
)

// NoDevicef is fmt.Errorf for an error that is ErrNoDevice (errors.Is)
// without ending in its text: for messages that say themselves which
// device, port or address is missing, where "no RDMA device serves that
// address" would not fit (a Device or Port that names nothing).
func NoDevicef(format string, args ...any) error {
	return &noDeviceError{fmt.Errorf(format, args...)}
}

type noDeviceError struct{ err error }

func (e *noDeviceError) Error() string   { return e.err.Error() }
func (e *noDeviceError) Unwrap() []error { return []error{e.err, ErrNoDevice} }

// Provider is one verbs backend. Providers register themselves with
// Register from an init function.
type Provider interface {
	// Name is "software" or "rdma-core".
	Name() string
	// Available reports whether the provider can run here: nil, or an
	// error wrapping ErrUnavailable that says why and how to fix it.
	Available() error
	// Devices lists the devices and ports the provider sees.
	Devices() ([]DeviceAttr, error)
	// Serves reports whether an active port of this provider serves the
	// interface or address of cfg (what backend "auto" asks before Bind).
	Serves(cfg BindConfig) bool
	// Bind resolves cfg to a device, port and GID the way rdma_bind_addr
	// does and returns an ID bound there (rdma_create_id with
	// RDMA_PS_UDP + rdma_bind_addr).
	Bind(cfg BindConfig) (ID, error)
}

// BindConfig says where to bind. Interface and Addr follow
// net.ListenMulticastUDP and rdma_bind_addr: Addr, when set, is the local
// address (it selects the netdev and GID); otherwise Interface selects the
// netdev and its first address is used. Neither set means loopback: never
// the interface of the default route.
type BindConfig struct {
	Interface *net.Interface
	Addr      net.IP
	// Device and Port, when set, must agree with what the address resolves
	// to (or select the port directly where no address is given).
	Device string
	Port   int
	// IPv6 asks for an IPv6 binding ("rdma6").
	IPv6 bool
}

// Binding is where an ID is bound: what rdma_cm resolved.
type Binding struct {
	Device    string
	Port      int
	GIDIndex  int
	GID       GID
	GIDType   infiniband.GIDType
	IP        net.IP // the local address bound
	Netdev    string // the network interface under the port
	LinkLayer infiniband.LinkLayer
	MTU       int // active path MTU in bytes: the largest UD payload
}

// ID is a connection-manager identity (an rdma_cm_id in RDMA_PS_UDP) bound
// to one local port. It owns at most one UD QP, created by CreateQP, and
// everything under it.
type ID interface {
	// Local is where the ID is bound.
	Local() Binding
	// CreateQP creates the PD, the send and receive CQs with their
	// completion channels and a UD QP, and moves the QP to RTS with the
	// configured Q_Key. One QP per ID.
	CreateQP(cfg QPConfig) (QP, error)
	// Join joins a multicast group (rdma_join_multicast) and waits for
	// the MULTICAST_JOIN event or ctx. For a full member the QP is
	// attached to the MGID; a send-only join attaches nothing. The QP
	// must exist.
	Join(ctx context.Context, g Group, opt JoinOptions) (Membership, error)
	// Leave detaches the QP and leaves the group (rdma_leave_multicast).
	Leave(mgid GID) error
	// Events is the asynchronous event channel of the ID: multicast
	// errors and device removal.
	Events() EventChannel
	// Close leaves every group, destroys the QP, CQs, channels, MRs, AHs,
	// PD and the ID. It is idempotent. The caller must make sure no other
	// call on the ID or its children is in progress.
	Close() error
}

// Group names a multicast group: an IP group address, or a raw MGID (as
// mckey -M). When MGID is non-zero it is used as is.
type Group struct {
	IP   net.IP
	MGID GID
}

// JoinOptions qualifies a join.
type JoinOptions struct {
	// SendOnly joins as a send-only full member (SendOnlyFullMember):
	// the QP is not attached and receives nothing from the group.
	SendOnly bool
}

// Membership is what a MULTICAST_JOIN event carries: how to send to the
// group.
type Membership struct {
	MGID      GID
	AH        AHAttr // address handle attributes to reach the group
	RemoteQPN uint32 // MulticastQPN
	QKey      uint32
	MTU       int // path MTU in bytes
	SendOnly  bool
}

// QPConfig configures CreateQP. Zero values take the defaults of
// defaults.go (WithDefaults).
type QPConfig struct {
	SendDepth int // send queue depth (DefaultSendDepth)
	RecvDepth int // receive queue depth (DefaultRecvDepth)
	// MaxInline asks for inline sends up to this many bytes; the QP
	// reports what it got in MaxInline().
	MaxInline int
	QKey      uint32 // DefaultQKey
	// BlockSelfMulticastLoopback asks the device not to deliver this QP's
	// multicast sends back to itself (IBV_QP_CREATE_BLOCK_SELF_MCAST_LB).
	// Where unsupported, CreateQP succeeds and QP.LoopbackBlocked()
	// reports false: the caller filters instead.
	BlockSelfMulticastLoopback bool
	// GRO asks the software provider for receive-side UDP GRO: a batch a
	// peer sent as one GSO run arrives as one read (soft/gro.go). It is
	// off by default because a run that a full socket buffer drops counts
	// once in the drops, not once per datagram. Other providers ignore it.
	GRO bool
	// GRHAddressesOnly says the consumer reads only the addresses from a
	// received GRH (source and destination GID). A provider that pays per
	// datagram for the rest may then leave the hop limit and traffic
	// class (IPv4 TTL and TOS) zero: the software backend saves the two
	// control messages the kernel would write for them. The header stays
	// well-formed (its checksum covers what is written). Devices fill the
	// whole GRH either way.
	GRHAddressesOnly bool
}

// QP is a UD queue pair in RTS.
type QP interface {
	QPN() uint32
	QKey() uint32
	// MaxInline is the largest inline send the QP accepts (0: none).
	MaxInline() int
	// LoopbackBlocked reports whether the device blocks this QP's own
	// multicast sends from coming back to it.
	LoopbackBlocked() bool
	// RegisterMemory registers an arena for local access (ibv_reg_mr).
	RegisterMemory(a *Arena) (MR, error)
	// CreateAH creates an address handle (ibv_create_ah). As on RoCE,
	// where the kernel resolves the destination's route and neighbour, a
	// unicast DGID that cannot be reached fails here (wrapping
	// ENETUNREACH, EHOSTUNREACH, ...), not at the send.
	CreateAH(attr AHAttr) (AH, error)
	// PostRecv posts receive work requests. It returns how many were
	// posted; on a partial post the error says why the next one failed.
	PostRecv(wrs []RecvWR) (int, error)
	// PostSend posts send work requests; like PostRecv. A send longer
	// than the path MTU fails with ErrMessageSize; a full send queue with
	// ErrQueueFull. A provider that sends at post time (software) and is
	// given a single WR returns the kernel's error for it (wrapping the
	// errno, for example *os.SyscallError{"sendto", EMSGSIZE}) and does
	// not count it posted; sends of a batch that fail complete with an
	// error status and WC.Errno instead.
	PostSend(wrs []SendWR) (int, error)
	// PollPostSend is a write's reap-then-post in one call (one cgo
	// crossing on rdma-core, where a crossing is a sizeable part of a
	// post): it polls the send CQ into wcs and then, only if that filled
	// fewer than len(wcs) and every completion succeeded, posts wrs as
	// PostSend does. It returns the completions polled, the sends posted
	// (0 when it did not post), and the poll's error (nothing posted) or
	// the post's. A wrapper of a QP that changes PostSend or the send CQ
	// wraps this too (PollThenPost does it through the wrapper).
	PollPostSend(wcs []WC, wrs []SendWR) (polled, posted int, err error)
	SendCQ() CQ
	RecvCQ() CQ

	// Ready reports whether the QP is in RTS (ibv_query_qp): false once
	// it went to the error state. A UD QP that was sending when its port
	// went down ends in ERR (rxe does this on a link flap), where every
	// later send completes with an error and nothing leaves; so does a
	// QP whose device raised QP_FATAL (EventQPError). A send that failed
	// alone (the software provider's kernel refusals, WC.Errno set) leaves
	// the QP in RTS.
	Ready() (bool, error)
	// Reset brings the QP back from the error state in place: through
	// RESET, INIT and RTR to RTS (ibv_modify_qp), with the P_Key index,
	// port and Q_Key it had. It keeps the QP number, the Q_Key and the
	// multicast attachments, so peers and groups need not learn anything
	// new; what was posted is gone: the caller reposts its receives and
	// forgets its outstanding sends. It fails with ErrPortDown, doing
	// nothing, while the port is not ACTIVE: a QP reset then would only
	// fail again (and rxe's may not send even once the link is back). The
	// caller makes sure no post or poll on the QP runs meanwhile.
	Reset() error

	// DropCounts says how many received packets the QP dropped, by
	// reason: the keys are the Drop* constants (drops.go), and every
	// reason the provider can count is present, zero or not (none where
	// it can count none). The software provider counts each reason per
	// QP; on rdma-core, where no device tells a QP what it dropped, the
	// one reason is DropDeviceOverflow, the port's estimate. Reading the
	// counters allocates; counting does not.
	DropCounts() map[string]uint64
	// DeviceCounts returns how much each of the device's counters that
	// say more about loss than the QP itself can grew since the QP was
	// created: rdma-core's port hw_counters (rxe's rcvd_pkts and
	// rdma_recvs, mlx5's out_of_buffer), the software provider's UDP MIB
	// of the QP's network namespace (UdpRcvbufErrors, UdpInErrors, ...,
	// named as nstat names them). They are the device's, shared by every
	// QP on the port (or in the namespace): not this QP's. Nil where the
	// device has none, or they cannot be read.
	DeviceCounts() map[string]uint64

	// SetSocketBuffer sets the kernel socket buffers of a QP made of
	// sockets, as net.UDPConn's SetReadBuffer and SetWriteBuffer do:
	// recv, SO_RCVBUF of every socket the QP receives on; otherwise
	// SO_SNDBUF of the one it sends from. It returns the size granted, as
	// SocketBuffer does. A QP with no sockets (rdma-core's, whose
	// buffering is its posted work requests) returns ErrNotSupported.
	SetSocketBuffer(recv bool, bytes int) (granted int, err error)
	// SocketBuffer returns the size the kernel granted the buffers
	// SetSocketBuffer sets (the smallest of them): the request, capped at
	// net.core.rmem_max or wmem_max, and at least the kernel's minimum;
	// half what getsockopt reports, which counts the kernel's doubling
	// for its bookkeeping. 0 for a QP with no sockets.
	SocketBuffer(recv bool) int
}

// PollThenPost is QP.PollPostSend in two calls, q's send CQ's Poll and
// then its PostSend: for providers (and wrappers of one) with nothing to
// gain from doing both at once.
func PollThenPost(q QP, wcs []WC, wrs []SendWR) (polled, posted int, err error) {
	polled, err = q.SendCQ().Poll(wcs)
	if err != nil {
		return 0, 0, err
	}
	if polled == len(wcs) {
		return polled, 0, nil
	}
	for i := range wcs[:polled] {
		if wcs[i].Status != WCSuccess {
			return polled, 0, nil
		}
	}
	posted, err = q.PostSend(wrs)
	return polled, posted, err
}

// CQ is a completion queue with its own completion channel.
type CQ interface {
	// Poll fills wcs with completions and returns how many (0 when none);
	// it never blocks.
	Poll(wcs []WC) (int, error)
	// NewWaiter returns the CQ's blocking wait-poll, built by the
	// provider on internal/poller: how the CQ's channel is armed,
	// drained, acknowledged or watched is the provider's business. spin
	// is the spin window (0: none). A CQ has at most one waiter; the ID's
	// Close frees it with the CQ.
	NewWaiter(spin time.Duration) (CQWaiter, error)
	// ReqNotify arms the CQ (ibv_req_notify_cq, all completions): the
	// next completion raises an event on the channel. Poll once more
	// after arming before sleeping. The waiter does this; tests of a
	// provider may too.
	ReqNotify() error
	// Channel is the CQ's completion channel (the waiter's and the
	// provider tests' business).
	Channel() Channel
	// Unread reports, without taking anything from the CQ, whether the
	// next Poll would find completions (pending), and whether the CQ can
	// tell at all (known). The software provider's CQs can: a receive
	// CQ's datagrams wait in its sockets' receive queues until Poll reads
	// them (or a read already took them and the CQ has not completed
	// them yet), a send CQ's completions in its ring. rdma-core's cannot:
	// ibv_poll_cq takes the completions it finds, and no verb only
	// looks, so it answers known false (the caller may poll and keep
	// what it finds). Pending is false once the CQ is closed. It may be
	// called from any goroutine, also while a waiter sleeps on the CQ.
	Unread() (pending, known bool)
}

// CQWaiter waits for one CQ's completions: in the Go runtime's netpoller
// where the CQ has a channel fd, so deadlines and "Close unblocks" come
// from Go's internal/poll (a CQ whose completions the provider makes in
// Go, as the software provider's send CQ, may wait on a Go channel and a
// timer instead). Its
// calls, except SetDeadline and Close, must not run concurrently (rdmanet
// holds its read or write lock around WaitPoll).
type CQWaiter interface {
	// WaitPoll polls the CQ into wcs and returns how many completions it
	// found, waiting while there are none: until completions arrive, the
	// deadline passes (os.ErrDeadlineExceeded) or the waiter is closed
	// (net.ErrClosed). A provider error from the poll ends it too. With a
	// spin window it polls for up to that long before it sleeps.
	WaitPoll(wcs []WC) (int, error)
	// SetDeadline sets the deadline of WaitPoll, also of one already
	// blocked; the zero time means none.
	SetDeadline(t time.Time) error
	// Wake makes a blocked WaitPoll, or else the next one that would
	// sleep, return (0, nil), so that its caller can act before waiting
	// again (rdmanet resets a failed QP so). It may be called from any
	// goroutine.
	Wake()
	// Close unblocks a WaitPoll with net.ErrClosed; later ones return it
	// at once. It is idempotent and leaves the CQ as it is.
	Close() error
}

// Channel is a completion or event channel: a non-blocking file
// descriptor that becomes readable when there is something to collect
// (-1 for a CQ that needs none: the software provider's send CQ, whose
// completions PostSend makes). The fd stays owned by the channel; a
// poller must dup it.
type Channel interface {
	Fd() int
	// GetEvents consumes pending channel events (ibv_get_cq_event until
	// EAGAIN) and returns how many; 0 and nil when none were pending.
	GetEvents() (int, error)
	// AckEvents acknowledges n events (ibv_ack_cq_events), in batches;
	// what is not yet acknowledged when the CQ is destroyed is then.
	AckEvents(n int)
}

// EventChannel carries an ID's asynchronous events.
type EventChannel interface {
	// Fd is readable when Next may return an event; -1 where the
	// provider raises its events in Go and its waiter needs no fd (the
	// software provider).
	Fd() int
	// Next returns the next pending event without blocking; ok is false
	// when none is pending.
	Next() (ev Event, ok bool, err error)
	// NewWaiter returns the channel's blocking wait-poll, built by the
	// provider (on internal/poller where the channel is an fd). A
	// channel has at most one waiter; the ID's Close frees it.
	NewWaiter() (EventWaiter, error)
}

// EventWaiter waits for an ID's events. Its WaitPoll must not run
// concurrently with itself.
type EventWaiter interface {
	// WaitPoll collects pending events into evs (as Next would) and
	// returns how many, waiting while there are none: until one comes,
	// Wake is called (then it collects what is pending and returns,
	// possibly 0) or the waiter is closed (net.ErrClosed).
	WaitPoll(evs []Event) (int, error)
	// Wake makes a blocked WaitPoll, or else the next one that would
	// sleep, look again and return: for events a provider queued
	// without the channel showing them (rdma-core's Join reads the
	// channel and queues what is not its own). Any goroutine may call it.
	Wake()
	// Close unblocks WaitPoll with net.ErrClosed; later ones return it
	// at once. It is idempotent and leaves the channel as it is.
	Close() error
}

// EventType is the kind of an asynchronous event.
type EventType int

const (
	// EventMulticastError says a group membership broke (for example
	// after a subnet manager change); the group must be rejoined.
	EventMulticastError EventType = iota + 1
	// EventDeviceRemoval says the device is going away; every object
	// under the ID is dead and must be closed.
	EventDeviceRemoval
	// EventAddrChange says the bound address moved (informational).
	EventAddrChange
	// EventPortError says the bound port went down (IBV_EVENT_PORT_ERR, for
	// example its netdev's link): nothing can be sent until
	// EventPortActive, and a QP that sends meanwhile goes to the error
	// state.
	EventPortError
	// EventPortActive says the bound port is up again
	// (IBV_EVENT_PORT_ACTIVE).
	EventPortActive
	// EventQPError says the ID's QP went to the error state
	// (IBV_EVENT_QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR): it must be reset
	// (QP.Reset) before it sends or receives again.
	EventQPError
)

func (t EventType) String() string {
	switch t {
	case EventMulticastError:
		return "MULTICAST_ERROR"
	case EventDeviceRemoval:
		return "DEVICE_REMOVAL"
	case EventAddrChange:
		return "ADDR_CHANGE"
	case EventPortError:
		return "PORT_ERR"
	case EventPortActive:
		return "PORT_ACTIVE"
	case EventQPError:
		return "QP_FATAL"
	}
	return "UNKNOWN_EVENT"
}

// Event is one asynchronous event.
type Event struct {
	Type   EventType
	MGID   GID // for EventMulticastError
	Status int // the event's status (errno), if any
}

// MR is a registered memory region over one Arena.
type MR interface {
	LKey() uint32
	Arena() *Arena
	// Close deregisters the region (ibv_dereg_mr); no posted receive or
	// send may still use it. It is idempotent; the ID deregisters what
	// is left on Close.
	Close() error
}

// AH is an address handle.
type AH interface {
	Attr() AHAttr
	// Close destroys the AH (ibv_destroy_ah). The ID also destroys its
	// AHs on Close.
	Close() error
}

// AHAttr are address handle attributes (struct ibv_ah_attr with its GRH).
type AHAttr struct {
	DGID         GID
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32
	IsGlobal     bool // a GRH is present (always true on RoCE)
	DLID         uint16
	SL           uint8
	PortNum      uint8
}

// SGE is one scatter/gather element: Length bytes at Offset in the arena
// registered as the MR with LKey.
type SGE struct {
	Offset uint32
	Length uint32
	LKey   uint32
}

// RecvWR is a receive work request. The buffer must hold GRHSize bytes of
// GRH followed by the payload.
type RecvWR struct {
	WRID uint64
	SGE  SGE
}

// SendFlags qualify a send work request.
type SendFlags uint8

const (
	SendSignaled  SendFlags = 1 << iota // generate a completion
	SendInline                          // copy the payload at post time
	SendSolicited                       // set the BTH SE bit
	SendWithImm                         // SEND_WITH_IMM: Imm is sent
)

// SendWR is a UD send work request. Its payload is SGE's bytes, or for an
// inline send (SendInline) with Inline set, Inline's: like
// ibv_wr_set_inline_data, the post reads those bytes before it returns,
// from memory that need not be registered, so the caller may reuse them
// at once. Inline must then be at most the QP's MaxInline bytes.
type SendWR struct {
	WRID       uint64
	SGE        SGE
	Inline     []byte
	AH         AH
	RemoteQPN  uint32
	RemoteQKey uint32
	Imm        uint32 // network byte order as on the wire, host value here
	Flags      SendFlags
}

// WCStatus is a work completion status (enum ibv_wc_status).
type WCStatus int

const (
	WCSuccess       WCStatus = 0
	WCLocLenErr     WCStatus = 1
	WCLocQPOpErr    WCStatus = 2
	WCLocProtErr    WCStatus = 4
	WCWRFlushErr    WCStatus = 5
	WCGeneralErr    WCStatus = 21
	WCRemInvReqErr  WCStatus = 9
	WCFatalErr      WCStatus = 19
	WCRespTimeoutEr WCStatus = 20
)

func (s WCStatus) String() string {
	switch s {
	case WCSuccess:
		return "success"
	case WCLocLenErr:
		return "local length error"
	case WCLocQPOpErr:
		return "local QP operation error"
	case WCLocProtErr:
		return "local protection error"
	case WCWRFlushErr:
		return "work request flushed"
	case WCGeneralErr:
		return "general error"
	case WCRemInvReqErr:
		return "remote invalid request"
	case WCFatalErr:
		return "fatal error"
	case WCRespTimeoutEr:
		return "response timeout"
	}
	return "wc status " + strconv.Itoa(int(s))
}

// WCOpcode is the kind of work that completed.
type WCOpcode uint8

const (
	WCSend WCOpcode = 0
	WCRecv WCOpcode = 128
)

// WCFlags qualify a work completion.
type WCFlags uint8

const (
	WCGRH     WCFlags = 1 << iota // the buffer's first 40 bytes hold a GRH
	WCWithImm                     // Imm is valid
)

// WC is a work completion (struct ibv_wc). For a receive, ByteLen counts
// the 40 bytes of GRH area too.
//
// A send that fails after it was posted (one of a batch the kernel
// refused, a device's error completion) completes with an error status,
// signaled or not. Errno is the errno the provider knows for it, 0 when
// it knows none: the software provider sets it from the failed
// sendmmsg/sendto (EMSGSIZE, ENETUNREACH, ENOBUFS, ...); devices report a
// vendor syndrome instead, so rdma-core leaves it 0.
type WC struct {
	WRID    uint64
	Status  WCStatus
	Opcode  WCOpcode
	Flags   WCFlags
	SL      uint8
	ByteLen uint32
	Imm     uint32
	QPN     uint32 // local QP
	SrcQP   uint32 // sender's QP (receives)
	SLID    uint16
	PKeyIdx uint16
	Errno   uint32 // the failed send's errno, where known
}
