//go:build linux && cgo

package rdmacore

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// The asynchronous events of a device (ibv_get_async_event: port down and
// up, a QP gone to the error state) arrive on the async fd of its verbs
// context, and librdmacm keeps one context per device for every cm id of
// the process. So one devCtx per context reads them, for every ID bound
// there: whichever ID's Next runs first drains the fd and queues each
// event on the IDs it concerns, waking each through its eventfd.
//
// An ID's Events().Fd() is an epoll set over the cm event channel, the
// context's async fd and the ID's eventfd: readable when Next may have
// something.
type devCtx struct {
	ctx *C.struct_rn_ibv_context
	fd  int

	mu  sync.Mutex // ids; serializes ibv_get_async_event
	ids map[*id]struct{}
	// removed: an ID here saw DEVICE_REMOVAL. The last ID to go then
	// makes librdmacm drop the device (id.Close).
	removed bool
}

var devCtxs struct {
	mu sync.Mutex
	m  map[*C.struct_rn_ibv_context]*devCtx
}

// attachDev registers d for the async events of its context.
func attachDev(d *id) (*devCtx, error) {
	ctx := d.cm.verbs
	devCtxs.mu.Lock()
	defer devCtxs.mu.Unlock()
	dc := devCtxs.m[ctx]
	if dc == nil {
		fd := int(C.rn_async_fd(ctx))
		// Nothing else reads this fd: librdmacm only opens the context.
		if err := unix.SetNonblock(fd, true); err != nil {
			return nil, fmt.Errorf("rdmacore: set async event fd non-blocking: %w", err)
		}
		dc = &devCtx{ctx: ctx, fd: fd, ids: map[*id]struct{}{}}
		if devCtxs.m == nil {
			devCtxs.m = map[*C.struct_rn_ibv_context]*devCtx{}
		}
		devCtxs.m[ctx] = dc
	}
	dc.mu.Lock()
	dc.ids[d] = struct{}{}
	dc.mu.Unlock()
	return dc, nil
}

// detach unregisters d, which has destroyed its cm id; the last ID
// forgets the context (librdmacm may close it once no cm id uses it). It
// reports whether d was the last ID on a removed device.
func (dc *devCtx) detach(d *id) (lastRemoved bool) {
	devCtxs.mu.Lock()
	defer devCtxs.mu.Unlock()
	dc.mu.Lock()
	delete(dc.ids, d)
	empty := len(dc.ids) == 0
	if d.removed.Load() {
		dc.removed = true
	}
	lastRemoved = empty && dc.removed
	dc.mu.Unlock()
	if empty && devCtxs.m[dc.ctx] == dc {
		delete(devCtxs.m, dc.ctx)
	}
	return lastRemoved
}

// drain reads every pending async event and hands each to the IDs it
// concerns.
func (dc *devCtx) drain() {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	for {
		var ev C.struct_rn_async_event
		if C.rn_get_async_event(dc.ctx, &ev) != 0 {
			return // EAGAIN, or the context is going away
		}
		for d := range dc.ids {
			d.asyncEvent(int(ev._type), int(ev.port), uintptr(ev.qp))
		}
	}
}

// asyncEvent queues an async event that concerns d and wakes its event
// channel.
func (d *id) asyncEvent(typ, port int, qp uintptr) {
	var ev verbs.Event
	switch typ {
	case C.RN_IBV_EVENT_PORT_ERR, C.RN_IBV_EVENT_PORT_ACTIVE:
		if port != d.local.Port {
			return
		}
		ev.Type = verbs.EventPortActive
		if typ == C.RN_IBV_EVENT_PORT_ERR {
			ev.Type = verbs.EventPortError
		}
	case C.RN_IBV_EVENT_QP_FATAL, C.RN_IBV_EVENT_QP_REQ_ERR, C.RN_IBV_EVENT_QP_ACCESS_ERR:
		if qp == 0 || qp != d.qpAddr.Load() {
			return
		}
		ev.Type = verbs.EventQPError
	default:
		return
	}
	d.asyncMu.Lock()
	d.asyncQ = append(d.asyncQ, ev)
	d.asyncMu.Unlock()
	d.wake()
}

// wake makes d's event channel readable.
func (d *id) wake() {
	one := [8]byte{1}
	unix.Write(d.efd, one[:]) // EAGAIN: already readable
}

// openEventSet makes d's eventfd and the epoll set that Events().Fd()
// returns.
func (d *id) openEventSet() error {
	var err error
	d.epfd, d.efd = -1, -1
	if d.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return fmt.Errorf("rdmacore: eventfd: %w", err)
	}
	if d.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		d.closeEventSet()
		return fmt.Errorf("rdmacore: epoll_create1: %w", err)
	}
	for _, fd := range []int{d.chFd, d.dev.fd, d.efd} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(d.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			d.closeEventSet()
			return fmt.Errorf("rdmacore: epoll_ctl add %d: %w", fd, err)
		}
	}
	return nil
}

// clearWake consumes the eventfd's count.
func (d *id) clearWake() {
	var b [8]byte
	unix.Read(d.efd, b[:])
}

func (d *id) closeEventSet() {
	if d.epfd >= 0 {
		unix.Close(d.epfd)
		d.epfd = -1
	}
	if d.efd >= 0 {
		unix.Close(d.efd)
		d.efd = -1
	}
}
