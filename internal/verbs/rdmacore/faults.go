//go:build linux && cgo

package rdmacore

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Ready reports whether the QP is in RTS (verbs.QP): not once a send
// completed with an error, until Reset. A device moves a QP whose send
// failed out of RTS, but rxe shows the completion before the state
// (rxe_completer completes the WQE, then calls rxe_qp_error), and a
// failed completion may be read after a reset that came between: the
// failure itself says the QP needs a reset, whatever ibv_query_qp says at
// that moment.
func (q *qp) Ready() (bool, error) {
	if err := q.check("ibv_query_qp"); err != nil {
		return false, err
	}
	if q.sendErr.Load() {
		return false, nil
	}
	q.d.mu.Lock()
	defer q.d.mu.Unlock()
	if q.d.qp != q || q.d.cm.qp == nil {
		return false, fmt.Errorf("ibv_query_qp: %w", verbs.ErrClosed)
	}
	var state C.int
	var qkey C.uint32_t
	if e := C.rn_query_qp_state(q.d.cm.qp, &state, &qkey); e != 0 {
		return false, fmt.Errorf("ibv_query_qp: %w", unix.Errno(e))
	}
	return state == C.RN_IBV_QPS_RTS, nil
}

// Reset takes the QP back to RTS through RESET (rn_reset_qp). No post may
// run meanwhile: it holds the send lock and the MR table exclusively,
// which every post holds shared.
func (q *qp) Reset() error {
	if err := q.check("ibv_modify_qp"); err != nil {
		return err
	}
	q.sendMu.Lock()
	defer q.sendMu.Unlock()
	q.mrMu.Lock()
	defer q.mrMu.Unlock()
	q.d.mu.Lock()
	defer q.d.mu.Unlock()
	if q.d.qp != q || q.d.cm.qp == nil {
		return fmt.Errorf("ibv_modify_qp: %w", verbs.ErrClosed)
	}
	pa, err := queryPort(q.d.cm.verbs, q.d.local.Device, q.d.local.Port)
	if err != nil {
		return err
	}
	if pa.State != infiniband.PortActive {
		return fmt.Errorf("ibv_modify_qp QP %#x: %s port %d is %v: %w", q.qpn, q.d.local.Device, q.d.local.Port, pa.State, verbs.ErrPortDown)
	}
	if e := C.rn_reset_qp(q.d.cm.qp, C.int(q.d.local.Port)); e != 0 {
		return fmt.Errorf("ibv_modify_qp QP %#x to RTS through RESET: %w", q.qpn, unix.Errno(e))
	}
	q.sendErr.Store(false)
	return nil
}

// noteSendErrors sets flag if a send completion in wcs failed.
func noteSendErrors(flag *atomic.Bool, wcs []verbs.WC) {
	for i := range wcs {
		if wcs[i].Status != verbs.WCSuccess {
			flag.Store(true)
			return
		}
	}
}

// DeviceCounts returns how much each of the port's hw_counters grew since
// the QP was created: the device's counts, shared by every QP on the port.
func (q *qp) DeviceCounts() map[string]uint64 {
	now := readHWCounters(q.d.local.Device, q.d.local.Port)
	if now == nil {
		return nil
	}
	return counterDeltas(q.hw0, now)
}

// DropCounts reports the port's receive-overflow estimate (counters.go)
// under DeviceOverflow.
func (q *qp) DropCounts() map[string]uint64 {
	if n, ok := deviceDrops(q.DeviceCounts()); ok {
		return map[string]uint64{DeviceOverflow: n}
	}
	return nil
}

// SetSocketBuffer returns verbs.ErrNotSupported: a verbs QP has no
// socket; its buffering is its posted work requests, sized when it is
// created.
func (q *qp) SetSocketBuffer(bool, int) (int, error) { return 0, verbs.ErrNotSupported }

// SocketBuffer returns 0: a verbs QP has no socket.
func (q *qp) SocketBuffer(bool) int { return 0 }
