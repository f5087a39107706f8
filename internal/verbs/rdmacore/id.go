//go:build linux && cgo

package rdmacore

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// enotsupp is the kernel's internal ENOTSUPP (524), which rdma_cm returns
// for IPv6 groups on RoCE v2 and which strerror calls "Unknown error 524".
const enotsupp = unix.Errno(524)

// id is an rdma_cm_id in RDMA_PS_UDP with its own event channel.
type id struct {
	ch   *C.struct_rn_rdma_event_channel
	chFd int
	cm   *C.struct_rn_rdma_cm_id

	local     verbs.Binding
	portState infiniband.PortState
	maxMcast  int
	// The device's other multicast limits, for the error of an attach
	// that passes one.
	maxMcastAttach, maxTotalAttach int

	removed atomic.Bool // DEVICE_REMOVAL seen
	closed  atomic.Bool

	// The device's async events (async.go): dev reads them, asyncQ holds
	// the ones for this ID, efd wakes epfd, the set Events().Fd() is.
	dev     *devCtx
	epfd    int
	efd     int
	asyncMu sync.Mutex
	asyncQ  []verbs.Event
	qpAddr  atomic.Uintptr // the struct ibv_qp's address, for QP events

	mu     sync.Mutex // qp, groups
	qp     *qp
	groups map[verbs.GID]*group

	// cmMu serializes rdma_get_cm_event and guards what pump fills.
	cmMu    sync.Mutex
	queue   []verbs.Event
	pending map[uint64]*joinResult // by join tag
	nextTag uint64
}

var _ verbs.ID = (*id)(nil)

// group is a joined group: what Leave needs.
type group struct {
	sa       sockaddr
	tag      uint64
	sendOnly bool
}

// joinResult is where pump leaves the outcome of a pending join.
type joinResult struct {
	done bool
	ev   C.struct_rn_cm_event
}

func (d *id) Local() verbs.Binding { return d.local }

func (d *id) Events() verbs.EventChannel { return (*eventChannel)(d) }

func (d *id) check(verb string) error {
	if d.closed.Load() {
		return fmt.Errorf("%s: %w", verb, verbs.ErrClosed)
	}
	if d.removed.Load() {
		return fmt.Errorf("%s: %s: %w", verb, d.local.Device, verbs.ErrDeviceRemoved)
	}
	return nil
}

// pump reads every pending CM event. Join outcomes go to their waiter;
// everything else is queued for Events().Next. The caller holds cmMu.
func (d *id) pump() error {
	for {
		var ev C.struct_rn_cm_event
		e := C.rn_get_cm_event(d.ch, &ev)
		if e != 0 {
			if unix.Errno(e) == unix.EAGAIN {
				return nil
			}
			return fmt.Errorf("rdma_get_cm_event: %w", unix.Errno(e))
		}
		switch ev.event {
		case C.RN_RDMA_CM_EVENT_MULTICAST_JOIN, C.RN_RDMA_CM_EVENT_MULTICAST_ERROR,
			C.RN_RDMA_CM_EVENT_UNREACHABLE, C.RN_RDMA_CM_EVENT_ADDR_ERROR:
			if r, ok := d.pending[uint64(ev.tag)]; ok {
				r.done, r.ev = true, ev
				delete(d.pending, uint64(ev.tag))
				continue
			}
			if ev.event == C.RN_RDMA_CM_EVENT_MULTICAST_JOIN {
				continue // a join given up on; Join left the group
			}
			qe := verbs.Event{Type: verbs.EventMulticastError, Status: int(ev.status)}
			d.mu.Lock()
			for mgid, g := range d.groups {
				if g.tag == uint64(ev.tag) {
					qe.MGID = mgid
				}
			}
			d.mu.Unlock()
			d.queue = append(d.queue, qe)
		case C.RN_RDMA_CM_EVENT_DEVICE_REMOVAL:
			d.removed.Store(true)
			d.queue = append(d.queue, verbs.Event{Type: verbs.EventDeviceRemoval, Status: int(ev.status)})
		case C.RN_RDMA_CM_EVENT_ADDR_CHANGE:
			d.queue = append(d.queue, verbs.Event{Type: verbs.EventAddrChange, Status: int(ev.status)})
		}
	}
}

// eventChannel is the ID's view as a verbs.EventChannel.
type eventChannel id

// Fd is an epoll set over the cm event channel, the device's async event
// fd and the ID's wake-up eventfd (async.go).
func (c *eventChannel) Fd() int { return c.epfd }

func (c *eventChannel) Next() (verbs.Event, bool, error) {
	d := (*id)(c)
	if d.closed.Load() {
		return verbs.Event{}, false, fmt.Errorf("rdma_get_cm_event: %w", verbs.ErrClosed)
	}
	d.clearWake()
	d.dev.drain()
	d.cmMu.Lock()
	defer d.cmMu.Unlock()
	err := d.pump()
	d.asyncMu.Lock()
	d.queue = append(d.queue, d.asyncQ...)
	d.asyncQ = d.asyncQ[:0]
	d.asyncMu.Unlock()
	if len(d.queue) > 0 {
		ev := d.queue[0]
		d.queue = d.queue[1:]
		return ev, true, nil
	}
	return verbs.Event{}, false, err
}

// joinPoll is how long Join waits for the event channel, in the
// netpoller, between looks at ctx.
const joinPoll = 50 * time.Millisecond

// joinWaiter is what Join sleeps on between looks at the event channel.
type joinWaiter interface {
	wait(time.Duration) error
	close()
}

// newJoinWait makes a Join's joinWaiter on the event channel's fd (a
// cmWait); tests replace it to make the waits fail.
var newJoinWait = func(fd int) (joinWaiter, error) {
	cw, err := newCMWait(fd)
	if err != nil {
		return nil, err
	}
	return cw, nil
}

// Join joins g in four steps: the checks (joinable), the post
// (postJoin), the wait for its event (awaitJoin) and the membership the
// event gives (membership). One deferred cleanup closes the wait, drops
// the pending entry and, for a posted join that does not end in a
// membership, leaves the group.
func (d *id) Join(ctx context.Context, g verbs.Group, opt verbs.JoinOptions) (m verbs.Membership, err error) {
	const verb = "rdma_join_multicast_ex"
	sa, err := d.joinable(verb, g)
	if err != nil {
		return verbs.Membership{}, err
	}
	cw, err := newJoinWait(d.chFd) // waits in the netpoller (wait.go)
	if err != nil {
		return verbs.Membership{}, fmt.Errorf("%s: %w", verb, err)
	}
	tag, res := d.addPending()
	posted := false
	defer func() {
		cw.close()
		d.dropPending(tag) // gone already if pump delivered the event
		if posted && err != nil {
			// librdmacm holds the group until it is left, whether the
			// event came (an error) or not (given up on).
			C.rn_leave(d.cm, unsafe.Pointer(&sa.b[0]))
		}
	}()
	if err := d.postJoin(verb, g, &sa, opt.SendOnly, tag); err != nil {
		return verbs.Membership{}, err
	}
	posted = true
	if err := d.awaitJoin(ctx, verb, cw, res); err != nil {
		return verbs.Membership{}, err
	}
	if m, err = d.membership(verb, g, opt, &res.ev); err != nil {
		return verbs.Membership{}, err
	}
	d.mu.Lock()
	d.groups[m.MGID] = &group{sa: sa, tag: tag, sendOnly: opt.SendOnly}
	d.mu.Unlock()
	return m, nil
}

// joinable checks that the ID can join g (a QP, a device with multicast,
// a group rdma_cm takes on this link) and returns the group's address.
func (d *id) joinable(verb string, g verbs.Group) (sockaddr, error) {
	if err := d.check(verb); err != nil {
		return sockaddr{}, err
	}
	d.mu.Lock()
	q := d.qp
	d.mu.Unlock()
	if q == nil {
		return sockaddr{}, fmt.Errorf("%s: create the QP before joining: %w", verb, unix.EINVAL)
	}
	if d.maxMcast == 0 {
		return sockaddr{}, fmt.Errorf("%s: %s has max_mcast_grp 0: no multicast on this device: %w",
			verb, d.local.Device, verbs.ErrNotSupported)
	}
	if groupIsIPv6(g) && d.local.GIDType == infiniband.GIDTypeRoCEv2 {
		return sockaddr{}, errIPv6RoCEv2(verb)
	}
	return groupSockaddr(g, d.local.LinkLayer)
}

// addPending gives a join its tag and the entry pump leaves its outcome
// in; dropPending removes the entry.
func (d *id) addPending() (uint64, *joinResult) {
	d.cmMu.Lock()
	defer d.cmMu.Unlock()
	d.nextTag++
	res := &joinResult{}
	d.pending[d.nextTag] = res
	return d.nextTag, res
}

func (d *id) dropPending(tag uint64) {
	d.cmMu.Lock()
	delete(d.pending, tag)
	d.cmMu.Unlock()
}

// postJoin posts the join (rdma_join_multicast_ex) with its tag.
func (d *id) postJoin(verb string, g verbs.Group, sa *sockaddr, sendOnly bool, tag uint64) error {
	so := C.int(0)
	if sendOnly {
		so = 1
	}
	e := C.rn_join(d.cm, unsafe.Pointer(&sa.b[0]), so, C.uintptr_t(tag))
	if e == 0 {
		return nil
	}
	errno := unix.Errno(e)
	switch {
	case refusesIPv6(errno, g):
		return errIPv6RoCEv2(verb)
	case isNotSupp(errno):
		return fmt.Errorf("%s: %w (%w)", verb, errno, verbs.ErrNotSupported)
	case errno == unix.ENODEV:
		d.removed.Store(true)
		return fmt.Errorf("%s: %w (%w)", verb, errno, verbs.ErrDeviceRemoved)
	}
	return fmt.Errorf("%s: %w", verb, errno)
}

// awaitJoin reads the event channel until pump has left the join's
// outcome in res, sleeping on cw between looks, at most joinPoll at a
// time so that ctx is seen. It fails when reading or waiting for the
// channel fails, the device is removed, or ctx is done.
func (d *id) awaitJoin(ctx context.Context, verb string, cw joinWaiter, res *joinResult) error {
	for {
		d.cmMu.Lock()
		err := d.pump()
		done := res.done
		d.cmMu.Unlock()
		switch {
		case done:
			return nil
		case err != nil:
			return err
		case d.removed.Load():
			return fmt.Errorf("%s: %w", verb, verbs.ErrDeviceRemoved)
		case ctx.Err() != nil:
			return fmt.Errorf("%s: waiting for MULTICAST_JOIN: %w", verb, ctx.Err())
		}
		wait := joinPoll
		if dl, ok := ctx.Deadline(); ok {
			if left := time.Until(dl); left < wait {
				wait = max(left, time.Millisecond)
			}
		}
		if err := cw.wait(wait); err != nil {
			return fmt.Errorf("%s: wait for the event channel: %w", verb, err)
		}
	}
}

// cmEventNames names the events that end a join other than
// MULTICAST_JOIN.
var cmEventNames = map[C.int]string{
	C.RN_RDMA_CM_EVENT_MULTICAST_ERROR: "MULTICAST_ERROR",
	C.RN_RDMA_CM_EVENT_UNREACHABLE:     "UNREACHABLE",
	C.RN_RDMA_CM_EVENT_ADDR_ERROR:      "ADDR_ERROR",
}

// membership is the membership a MULTICAST_JOIN gives, or the error of
// the event that ended the join instead.
func (d *id) membership(verb string, g verbs.Group, opt verbs.JoinOptions, ev *C.struct_rn_cm_event) (verbs.Membership, error) {
	if ev.event != C.RN_RDMA_CM_EVENT_MULTICAST_JOIN {
		st := ev.status
		if st < 0 {
			st = -st
		}
		errno := unix.Errno(st)
		if refusesIPv6(errno, g) {
			return verbs.Membership{}, errIPv6RoCEv2(verb)
		}
		if ev.event == C.RN_RDMA_CM_EVENT_MULTICAST_ERROR && ev.status == -1 && !opt.SendOnly {
			return verbs.Membership{}, d.attachError(verb, g)
		}
		return verbs.Membership{}, fmt.Errorf("%s: %s (status %d: %v) joining %s",
			verb, cmEventNames[ev.event], int(ev.status), errno, groupString(g))
	}
	ah := ahAttrFromC(&ev.ah_attr)
	return verbs.Membership{
		MGID:      ah.DGID,
		AH:        ah,
		RemoteQPN: uint32(ev.qp_num),
		QKey:      uint32(ev.qkey),
		MTU:       d.local.MTU,
		SendOnly:  opt.SendOnly,
	}, nil
}

// isNotSupp reports whether errno is rdma_cm's "not supported": the
// kernel's ENOTSUPP or EOPNOTSUPP.
func isNotSupp(errno unix.Errno) bool { return errno == enotsupp || errno == unix.EOPNOTSUPP }

// refusesIPv6 reports whether errno is rdma_cm refusing g for being an
// IPv6 group (as it does on RoCE v2).
func refusesIPv6(errno unix.Errno, g verbs.Group) bool { return isNotSupp(errno) && groupIsIPv6(g) }

func errIPv6RoCEv2(verb string) error {
	return fmt.Errorf("%s: IPv6 multicast groups are not supported on RoCE v2 by rdma_cm (ENOTSUPP); use an IPv4 group: %w",
		verb, verbs.ErrNotSupported)
}

func groupString(g verbs.Group) string {
	if !g.MGID.IsZero() {
		return "MGID " + g.MGID.String()
	}
	return g.IP.String()
}

func (d *id) Leave(mgid verbs.GID) error {
	verb := "rdma_leave_multicast"
	if d.closed.Load() {
		return fmt.Errorf("%s: %w", verb, verbs.ErrClosed)
	}
	d.mu.Lock()
	g, ok := d.groups[mgid]
	delete(d.groups, mgid)
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s %s: %w", verb, mgid, errNotJoined)
	}
	if e := C.rn_leave(d.cm, unsafe.Pointer(&g.sa.b[0])); e != 0 {
		if d.removed.Load() {
			return fmt.Errorf("%s %s: %w", verb, mgid, verbs.ErrDeviceRemoved)
		}
		return fmt.Errorf("%s %s: %w", verb, mgid, unix.Errno(e))
	}
	return nil
}

// Close leaves every group, destroys the QP and everything under it, then
// the cm id and its event channel. After DEVICE_REMOVAL the destroy verbs
// may fail; their errors are dropped then, since every object is dead.
func (d *id) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	var errs []error
	note := func(err error) {
		if err != nil && !d.removed.Load() {
			errs = append(errs, err)
		}
	}
	d.mu.Lock()
	for mgid, g := range d.groups {
		if e := C.rn_leave(d.cm, unsafe.Pointer(&g.sa.b[0])); e != 0 {
			note(fmt.Errorf("rdma_leave_multicast %s: %w", mgid, unix.Errno(e)))
		}
		delete(d.groups, mgid)
	}
	q := d.qp
	d.qp = nil
	d.mu.Unlock()
	if q != nil {
		note(q.destroy())
	}
	note(d.destroyID())
	d.closeEventSet()
	// After DEVICE_REMOVAL, librdmacm closes its verbs context of the
	// device (which the kernel waits for) only when it next reads the
	// device list. Read while another cm id on the device still lived, it
	// was seen to block for good (librdmacm reads it under the lock that
	// rdma_destroy_id takes): so only the last ID on the device, its own
	// cm id destroyed, reads it.
	if d.dev != nil && d.dev.detach(d) || d.dev == nil && d.removed.Load() {
		onControlThread(func() { C.rn_sync_devices() }) // it lists the devices: control.go
	}
	return errors.Join(errs...)
}

// destroyID destroys the cm id and the event channel (which closes its
// fd).
func (d *id) destroyID() error {
	var err error
	if d.cm != nil {
		if e := C.rn_destroy_id(d.cm); e != 0 {
			err = fmt.Errorf("rdma_destroy_id: %w", unix.Errno(e))
		}
		d.cm = nil
	}
	if d.ch != nil {
		C.rn_destroy_event_channel(d.ch)
		d.ch = nil
	}
	return err
}

func ahAttrFromC(a *C.struct_rn_ibv_ah_attr) verbs.AHAttr {
	var out verbs.AHAttr
	copy(out.DGID[:], C.GoBytes(unsafe.Pointer(&a.grh.dgid), 16))
	out.SGIDIndex = uint8(a.grh.sgid_index)
	out.HopLimit = uint8(a.grh.hop_limit)
	out.TrafficClass = uint8(a.grh.traffic_class)
	out.FlowLabel = uint32(a.grh.flow_label)
	out.IsGlobal = a.is_global != 0
	out.DLID = uint16(a.dlid)
	out.SL = uint8(a.sl)
	out.PortNum = uint8(a.port_num)
	return out
}

func ahAttrToC(in verbs.AHAttr) C.struct_rn_ibv_ah_attr {
	var a C.struct_rn_ibv_ah_attr
	copy((*[16]byte)(unsafe.Pointer(&a.grh.dgid))[:], in.DGID[:])
	a.grh.sgid_index = C.uint8_t(in.SGIDIndex)
	a.grh.hop_limit = C.uint8_t(in.HopLimit)
	a.grh.traffic_class = C.uint8_t(in.TrafficClass)
	a.grh.flow_label = C.uint32_t(in.FlowLabel)
	if in.IsGlobal {
		a.is_global = 1
	}
	a.dlid = C.uint16_t(in.DLID)
	a.sl = C.uint8_t(in.SL)
	a.port_num = C.uint8_t(in.PortNum)
	return a
}

// attachError is the error of a join whose MULTICAST_JOIN librdmacm turned
// into MULTICAST_ERROR with status -1: its ibv_attach_mcast failed, and
// the errno is lost (rdma_seterrno). Devices fail an attach at their
// multicast limits (ENOMEM on rxe and mlx5): the error names them.
func (d *id) attachError(verb string, g verbs.Group) error {
	return fmt.Errorf("%s: joining %s: librdmacm's ibv_attach_mcast failed (MULTICAST_ERROR, status -1): %w: "+
		"%s allows max_mcast_grp %d groups, max_mcast_qp_attach %d QPs in one group and "+
		"max_total_mcast_qp_attach %d attachments in all (ibv_devinfo -v); they are the device's "+
		"(rxe's are fixed when the kernel is built): spread the groups over another device, or use fewer conns per group",
		verb, groupString(g), verbs.ErrGroupLimit, d.local.Device, d.maxMcast, d.maxMcastAttach, d.maxTotalAttach)
}
