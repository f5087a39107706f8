package rdmanet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/ipoib"
)

// Conn is a UD queue pair joined to multicast groups, as a net.PacketConn.
//
// Reads and writes are safe for concurrent use. Reads are serialized among
// themselves, and so are writes, as with net.UDPConn.
type Conn struct {
	network string
	cfg     ListenConfig
	prov    verbs.Provider
	id      verbs.ID
	qp      verbs.QP
	local   verbs.Binding
	self    Addr         // this QP's address
	mtu     atomic.Int32 // path MTU: the port's, lowered by joins

	ctx        context.Context // canceled by Close: bounds joins
	cancel     context.CancelFunc
	closed     atomic.Bool
	closeMu    sync.Mutex            // held by Close; Stats takes it
	finalDrops map[string]uint64     // the QP's drop counts at Close
	fatalErr   atomic.Pointer[error] // set on device removal

	loopback atomic.Bool    // deliver own multicast messages
	bg       sync.WaitGroup // rejoin goroutines

	// The locks are taken in this order and released in reverse:
	// rd.mu, wr.mu, grp.mu, lend.mu. A write holds wr.mu while it looks a
	// group up and uses its AH, so joins, leaves and rejoins take wr.mu
	// before grp.mu; Close, a QP reset and device removal take all four
	// (lockAll, lockBelowRead).
	rd   recvState
	lend lendState
	wr   sendState
	grp  groupState
	ev   eventState
	rec  recoverState
	ctr  counters
	bufs bufState // SetReadBuffer, SetWriteBuffer: buffers.go
}

var _ net.PacketConn = (*Conn)(nil)

func listen(ctx context.Context, cfg ListenConfig, network string, ifi *net.Interface, group *net.UDPAddr) (_ *Conn, err error) {
	c := &Conn{network: network, cfg: cfg}
	addr := groupAddr(group)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	ipv6 := false
	switch network {
	case "rdma", "rdma4":
	case "rdma6":
		ipv6 = true
	default:
		return nil, c.opError("listen", addr, net.UnknownNetworkError(network))
	}
	if group != nil {
		if group.IP == nil || !group.IP.IsMulticast() {
			return nil, c.opError("listen", addr, &addrError{addr: group, why: "not a multicast group"})
		}
		if network == "rdma4" && group.IP.To4() == nil || network == "rdma6" && group.IP.To4() != nil {
			return nil, c.opError("listen", addr, &addrError{addr: group, why: "wrong address family for network " + network})
		}
	}
	bc := verbs.BindConfig{Interface: ifi, Addr: cfg.LocalAddr, Device: cfg.Device, Port: cfg.Port, IPv6: ipv6}
	var fallback string
	c.prov, fallback, err = chooseProvider(cfg.Backend, bc)
	if err != nil {
		return nil, c.opError("listen", addr, err)
	}
	c.cfg.RecvDepth = recvDepthFor(c.prov.Name(), c.cfg.RecvDepth)
	cfg = c.cfg
	c.id, err = c.prov.Bind(bc)
	if err != nil {
		if fallback != "" {
			err = &fallbackError{fallback, err}
		}
		return nil, c.opError("listen", addr, err)
	}
	defer func() {
		if err != nil {
			c.teardown()
		}
	}()
	c.qp, err = c.id.CreateQP(verbs.QPConfig{
		SendDepth:                  cfg.SendDepth,
		RecvDepth:                  cfg.RecvDepth,
		MaxInline:                  cfg.MaxInline,
		QKey:                       cfg.QKey,
		BlockSelfMulticastLoopback: cfg.DisableLoopback,
		GRO:                        cfg.SoftwareGRO,
		GRHAddressesOnly:           true, // the sender's GID is all a conn reads
	})
	if err != nil {
		c.local = c.id.Local()
		return nil, c.opError("listen", addr, c.explainCreateQP(err))
	}
	c.local = c.id.Local() // the provider may refine it once the QP exists
	c.mtu.Store(int32(c.local.MTU))
	if err = c.checkRings(); err != nil {
		return nil, c.opError("listen", addr, err)
	}
	c.self = Addr{GID: c.local.GID, QPN: c.qp.QPN()}
	c.loopback.Store(!cfg.DisableLoopback)
	if err = c.initRecv(); err != nil {
		return nil, c.opError("listen", addr, err)
	}
	if err = c.initSend(); err != nil {
		return nil, c.opError("listen", addr, err)
	}
	if err = c.initEvents(); err != nil {
		return nil, c.opError("listen", addr, err)
	}
	c.initBuffers()
	if group != nil {
		if err = c.join(ctx, verbs.Group{IP: group.IP}); err != nil {
			return nil, c.opError("listen", addr, err)
		}
	}
	return c, nil
}

// groupAddr is a listen error's Addr: the group, or none for a nil
// group, as net's own errors have it (a nil *net.UDPAddr would be an
// address that prints as "<nil>").
func groupAddr(group *net.UDPAddr) net.Addr {
	if group == nil {
		return nil
	}
	return group
}

// teardown frees everything; callers make sure nothing else runs.
func (c *Conn) teardown() {
	c.cancel()
	c.stopEvents()
	if c.rd.waiter != nil {
		c.rd.waiter.Close()
	}
	if c.wr.waiter != nil {
		c.wr.waiter.Close()
	}
	if c.id != nil {
		c.id.Close() // leaves groups, destroys AHs, QP, CQs, MRs, PD, ID
	}
	if c.rd.arena != nil {
		c.rd.arena.Free()
	}
	if c.wr.arena != nil {
		c.wr.arena.Free()
	}
	c.freeBuffers()
}

// Close leaves every group, unblocks every blocked call (they return
// net.ErrClosed), and frees the QP, CQs, memory and file descriptors.
//
// As with net.UDPConn, only the first call closes: later ones return a
// *net.OpError (Op "close") wrapping net.ErrClosed. On a closed conn every
// I/O, deadline and group call (ReadFrom, ReadFromAddr, ReadBatch,
// ReadLend, WriteTo, WriteBatch, WaitSends, Set*Deadline, SetReadBuffer,
// SetWriteBuffer, JoinGroup, LeaveGroup, GroupAddr, SetMulticastLoopback)
// returns a *net.OpError wrapping net.ErrClosed; Groups returns none;
// Stats returns the counters as they stood at Close; LocalAddr, MTU,
// MulticastLoopback, ReadBuffer, WriteBuffer and Backend keep answering
// with the conn's last values, as net.UDPConn's LocalAddr does.
// A Datagram still lent is reclaimed: its Release does nothing.
func (c *Conn) Close() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed.Swap(true) {
		return c.opError("close", nil, net.ErrClosed)
	}
	c.cancel()
	// Unblock waiters, then wait for in-flight reads and writes to leave
	// before the verbs objects go away.
	c.rd.waiter.Close()
	c.wr.waiter.Close()
	c.stopEvents()
	c.bg.Wait() // rejoins take wr.mu: let them go before locking
	// lockAll takes lend.mu too: a Release in flight finishes before the
	// QP goes.
	c.lockAll()
	c.finalDrops = c.dropCounts() // the QP's counters go with it
	c.teardown()
	c.grp.byIP, c.grp.byMGID = nil, nil
	c.wr.lastGroup = nil
	c.unlockAll()
	return nil
}

// lockAll takes the conn's four locks in the order written on Conn;
// unlockAll releases them.
func (c *Conn) lockAll() {
	c.rd.mu.Lock()
	c.lockBelowRead()
}

func (c *Conn) unlockAll() {
	c.unlockBelowRead()
	c.rd.mu.Unlock()
}

// lockBelowRead takes the locks after rd.mu in the order written on Conn
// (wr.mu, grp.mu, lend.mu), for a caller that holds rd.mu;
// unlockBelowRead releases them.
func (c *Conn) lockBelowRead() {
	c.wr.mu.Lock()
	c.grp.mu.Lock()
	c.lend.mu.Lock()
}

func (c *Conn) unlockBelowRead() {
	c.lend.mu.Unlock()
	c.grp.mu.Unlock()
	c.wr.mu.Unlock()
}

// qpDropCounts returns the QP's drop counters by reason; after Close, the
// ones it had then (the QP, and the sockets a software QP reads them from,
// are gone).
func (c *Conn) qpDropCounts() map[string]uint64 {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed.Load() {
		return c.finalDrops
	}
	return c.dropCounts()
}

// dropCounts asks the QP for its drop counters; closeMu is held.
func (c *Conn) dropCounts() map[string]uint64 {
	return c.qp.DropCounts()
}

// checkOpen returns the error a call on a closed or broken conn returns.
func (c *Conn) checkOpen() error {
	if c.closed.Load() {
		return net.ErrClosed
	}
	if e := c.fatalErr.Load(); e != nil {
		return *e
	}
	return nil
}

// mapWaitErr turns a waiter error into what the caller sees: a device
// removal wins over the closed waiter it caused.
func (c *Conn) mapWaitErr(err error) error {
	if errors.Is(err, net.ErrClosed) && !c.closed.Load() {
		if e := c.fatalErr.Load(); e != nil {
			return *e
		}
	}
	return err
}

// LocalAddr returns the conn's own address: its GID and QPN.
func (c *Conn) LocalAddr() net.Addr {
	a := c.self
	return &a
}

func (c *Conn) localAddr() net.Addr {
	if c.qp == nil {
		return nil
	}
	return c.LocalAddr()
}

// MTU returns the largest payload a write may carry: the path MTU of the
// port (and of every joined group). Longer writes fail.
func (c *Conn) MTU() int { return int(c.mtu.Load()) }

// Backend is which backend the conn uses and where it is bound.
type Backend struct {
	Name      string // "software" or "rdma-core"
	Device    string
	Port      int
	GIDIndex  int
	GID       ipoib.GID
	Netdev    string
	LinkLayer string
	// LoopbackBlocked says whether the device itself blocks this QP's own
	// multicast (IBV_QP_CREATE_BLOCK_SELF_MCAST_LB); otherwise the conn
	// filters it.
	LoopbackBlocked bool
}

// Backend reports the backend, device and port the conn uses.
func (c *Conn) Backend() Backend {
	return Backend{
		Name:            c.prov.Name(),
		Device:          c.local.Device,
		Port:            c.local.Port,
		GIDIndex:        c.local.GIDIndex,
		GID:             c.local.GID,
		Netdev:          c.local.Netdev,
		LinkLayer:       c.local.LinkLayer.String(),
		LoopbackBlocked: c.qp.LoopbackBlocked(),
	}
}

func (b Backend) String() string {
	return fmt.Sprintf("%s %s port %d (%s, %s, GID %s)", b.Name, b.Device, b.Port, b.Netdev, b.LinkLayer, b.GID)
}

// SetMulticastLoopback sets whether the conn receives its own multicast
// messages. Other conns on the host are not affected.
func (c *Conn) SetMulticastLoopback(on bool) error {
	if err := c.checkOpen(); err != nil {
		return c.opError("set", nil, err)
	}
	c.loopback.Store(on)
	return nil
}

// MulticastLoopback reports whether the conn receives its own multicast
// messages.
func (c *Conn) MulticastLoopback() bool { return c.loopback.Load() }

// SetDeadline sets the read and write deadlines, as SetReadDeadline and
// SetWriteDeadline do.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline for ReadFrom, ReadFromAddr, ReadBatch
// and ReadLend, with net.Conn's rules: a read called once the deadline has
// passed fails at once, even with a datagram waiting, with a *net.OpError
// for which errors.Is(err, os.ErrDeadlineExceeded) and Timeout() hold; a
// new deadline takes effect on reads blocked now (a past one wakes them);
// the zero time means no deadline.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if err := c.checkOpen(); err != nil {
		return c.opError("set", nil, err)
	}
	c.rd.deadline.Store(deadlineNanos(t))
	return c.opError("set", nil, c.rd.waiter.SetDeadline(t))
}

// SetWriteDeadline sets the deadline for WriteTo and WriteBatch, with the
// rules SetReadDeadline has: once it has passed, a write fails at once with
// a timeout and sends nothing, also when it would not have had to wait for
// a send slot; writes blocked on a full send ring wake when it is moved.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if err := c.checkOpen(); err != nil {
		return c.opError("set", nil, err)
	}
	c.wr.deadline.Store(deadlineNanos(t))
	return c.opError("set", nil, c.wr.waiter.SetDeadline(t))
}

func deadlineNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// deadlinePassed reports whether a stored deadline is in the past.
func deadlinePassed(d *atomic.Int64) bool {
	n := d.Load()
	return n != 0 && time.Now().UnixNano() >= n
}
