//go:build linux && cgo

package rdmacore

/*
#cgo noescape rn_post_recv
#cgo nocallback rn_post_recv
#cgo noescape rn_post_send
#cgo nocallback rn_post_send
#cgo noescape rn_poll_post_send
#cgo nocallback rn_poll_post_send
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// batch is how many requests one crossing posts or polls at most.
const batch = C.RN_BATCH

// qp is a UD QP created on the cm id, with its PD, CQs and channels.
type qp struct {
	d      *id
	ctx    *C.struct_rn_qpctx // C memory: the QP and its MR table
	pd     *C.struct_rn_ibv_pd
	scq    *cq
	rcq    *cq
	qpn    uint32
	qkey   uint32
	inline int
	lb     bool
	mtu    int
	hw0    map[string]uint64 // the port's hw_counters when the QP was made
	// sendErr: a send completed with an error since the QP was made or
	// last reset, so the QP left RTS (faults.go); the send CQ's Poll sets
	// it.
	sendErr atomic.Bool

	mrMu sync.RWMutex // the MR table in ctx; held shared while posting
	mrs  []*mr

	ahMu sync.Mutex
	ahs  map[*ah]struct{}

	sendMu  sync.Mutex
	sendBuf []C.struct_rn_send_in // Go memory without Go pointers
	// staged holds a batch's inline payloads (SendWR.Inline), inline
	// bytes a WR: C memory, so its address may go to C in sendBuf.
	staged []byte
}

var _ verbs.QP = (*qp)(nil)

// CreateQP creates the PD, two CQs each with its own completion channel
// (fd non-blocking) and a UD QP through rdma_create_qp_ex, which also
// moves it to RTS with rdma_cm's Q_Key; a different cfg.QKey is then set
// with ibv_modify_qp.
func (d *id) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	if err := d.check("rdma_create_qp_ex"); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.qp != nil {
		return nil, fmt.Errorf("rdma_create_qp_ex: the ID already has a QP: %w", unix.EEXIST)
	}
	cfg = cfg.WithDefaults()
	if cfg.MaxInline < 0 {
		cfg.MaxInline = 0
	}
	q := &qp{d: d, mtu: d.local.MTU, ahs: map[*ah]struct{}{}, sendBuf: make([]C.struct_rn_send_in, batch)}
	err := q.create(cfg)
	if err != nil {
		q.destroy()
		return nil, err
	}
	d.qp = q
	return q, nil
}

func (q *qp) create(cfg verbs.QPConfig) error {
	ctx := q.d.cm.verbs
	var e C.int
	if q.pd = C.rn_alloc_pd(ctx, &e); q.pd == nil {
		return fmt.Errorf("ibv_alloc_pd: %w", unix.Errno(e))
	}
	var err error
	if q.scq, err = newCQ(ctx, cfg.SendDepth, q.d); err != nil {
		return err
	}
	q.scq.sendErr = &q.sendErr
	if q.rcq, err = newCQ(ctx, cfg.RecvDepth, q.d); err != nil {
		return err
	}
	cap := C.struct_rn_ibv_qp_cap{
		max_send_wr:     C.uint32_t(cfg.SendDepth),
		max_recv_wr:     C.uint32_t(cfg.RecvDepth),
		max_send_sge:    1,
		max_recv_sge:    1,
		max_inline_data: C.uint32_t(cfg.MaxInline),
	}
	var flags C.uint32_t
	if cfg.BlockSelfMulticastLoopback {
		flags = C.RN_IBV_QP_CREATE_BLOCK_SELF_MCAST_LB
	}
	got := cap
	r := C.rn_create_qp(q.d.cm, q.pd, q.scq.cq, q.rcq.cq, &got, flags)
	if r != 0 && flags != 0 && (unix.Errno(r) == unix.EOPNOTSUPP || unix.Errno(r) == unix.EINVAL) {
		// rxe and others do not block self loopback: report it and go on.
		got = cap
		flags = 0
		r = C.rn_create_qp(q.d.cm, q.pd, q.scq.cq, q.rcq.cq, &got, 0)
	}
	if r != 0 {
		return fmt.Errorf("rdma_create_qp_ex: %w", unix.Errno(r))
	}
	q.lb = flags != 0
	q.inline = int(got.max_inline_data)
	if q.inline > 0 {
		q.staged = unsafe.Slice((*byte)(C.malloc(C.size_t(batch*q.inline))), batch*q.inline)
	}
	q.ctx = (*C.struct_rn_qpctx)(C.calloc(1, C.sizeof_struct_rn_qpctx))
	q.ctx.qp = q.d.cm.qp
	q.qpn = uint32(q.d.cm.qp.qp_num)
	q.d.qpAddr.Store(uintptr(unsafe.Pointer(q.d.cm.qp)))
	q.hw0 = readHWCounters(q.d.local.Device, q.d.local.Port)

	var state C.int
	var qkey C.uint32_t
	if e := C.rn_query_qp_state(q.d.cm.qp, &state, &qkey); e != 0 {
		return fmt.Errorf("ibv_query_qp: %w", unix.Errno(e))
	}
	if state != C.RN_IBV_QPS_RTS {
		return fmt.Errorf("rdma_create_qp_ex: QP %#x is in state %d, not RTS: %w", q.qpn, int(state), unix.EINVAL)
	}
	if uint32(qkey) != cfg.QKey {
		if e := C.rn_set_qkey(q.d.cm.qp, C.uint32_t(cfg.QKey)); e != 0 {
			return fmt.Errorf("ibv_modify_qp Q_Key %#x: %w", cfg.QKey, unix.Errno(e))
		}
		if e := C.rn_query_qp_state(q.d.cm.qp, &state, &qkey); e != 0 {
			return fmt.Errorf("ibv_query_qp: %w", unix.Errno(e))
		}
	}
	q.qkey = uint32(qkey)
	return nil
}

// destroy frees everything in the order the verbs require: the QP (and
// with it librdmacm's attachments), the AHs, the CQs (after acking every
// event read from their channels), the channels, the MRs, the PD.
func (q *qp) destroy() error {
	var errs []error
	q.d.qpAddr.Store(0)
	if q.d.cm != nil && q.d.cm.qp != nil {
		C.rn_destroy_qp(q.d.cm)
	}
	q.ahMu.Lock()
	for a := range q.ahs {
		if err := a.destroy(); err != nil {
			errs = append(errs, err)
		}
	}
	q.ahMu.Unlock()
	for _, c := range []*cq{q.scq, q.rcq} {
		if c != nil {
			errs = append(errs, c.destroy())
		}
	}
	q.mrMu.Lock()
	for _, m := range q.mrs {
		if e := C.rn_dereg_mr(m.mr); e != 0 {
			errs = append(errs, fmt.Errorf("ibv_dereg_mr: %w", unix.Errno(e)))
		}
		m.mr = nil
	}
	q.mrs = nil
	q.mrMu.Unlock()
	if q.pd != nil {
		if e := C.rn_dealloc_pd(q.pd); e != 0 {
			errs = append(errs, fmt.Errorf("ibv_dealloc_pd: %w", unix.Errno(e)))
		}
		q.pd = nil
	}
	if q.ctx != nil {
		C.free(unsafe.Pointer(q.ctx))
		q.ctx = nil
	}
	if q.staged != nil {
		C.free(unsafe.Pointer(&q.staged[0]))
		q.staged = nil
	}
	return errors.Join(errs...)
}

func (q *qp) QPN() uint32           { return q.qpn }
func (q *qp) QKey() uint32          { return q.qkey }
func (q *qp) MaxInline() int        { return q.inline }
func (q *qp) LoopbackBlocked() bool { return q.lb }
func (q *qp) SendCQ() verbs.CQ      { return q.scq }
func (q *qp) RecvCQ() verbs.CQ      { return q.rcq }

func (q *qp) check(verb string) error { return q.d.check(verb) }

// RegisterMemory registers the whole arena for local write access.
func (q *qp) RegisterMemory(a *verbs.Arena) (verbs.MR, error) {
	if err := q.check("ibv_reg_mr"); err != nil {
		return nil, err
	}
	b := a.Bytes()
	if len(b) == 0 {
		return nil, fmt.Errorf("ibv_reg_mr: empty arena: %w", unix.EINVAL)
	}
	q.mrMu.Lock()
	defer q.mrMu.Unlock()
	if int(q.ctx.nmr) >= C.RN_MAX_MR {
		return nil, fmt.Errorf("ibv_reg_mr: a QP takes at most %d memory regions: %w", C.RN_MAX_MR, unix.ENOSPC)
	}
	var e C.int
	m := C.rn_reg_mr(q.pd, C.uintptr_t(uintptr(unsafe.Pointer(&b[0]))), C.size_t(len(b)), &e)
	if m == nil {
		return nil, fmt.Errorf("ibv_reg_mr %d bytes: %w", len(b), unix.Errno(e))
	}
	ent := &q.ctx.mr[q.ctx.nmr]
	ent.lkey = m.lkey
	ent.addr = C.uint64_t(uintptr(unsafe.Pointer(&b[0])))
	ent.len = C.uint64_t(len(b))
	q.ctx.nmr++
	r := &mr{q: q, mr: m, arena: a, lkey: uint32(m.lkey)}
	q.mrs = append(q.mrs, r)
	return r, nil
}

// mr is a registered arena. Close deregisters it before the ID does.
type mr struct {
	q     *qp
	mr    *C.struct_rn_ibv_mr
	arena *verbs.Arena
	lkey  uint32
}

func (m *mr) LKey() uint32        { return m.lkey }
func (m *mr) Arena() *verbs.Arena { return m.arena }

// Close deregisters the region (ibv_dereg_mr); no receive or send may
// still use it. The ID deregisters what is left on Close.
func (m *mr) Close() error {
	q := m.q
	q.mrMu.Lock()
	defer q.mrMu.Unlock()
	if m.mr == nil {
		return nil
	}
	for i, x := range q.mrs {
		if x == m {
			q.mrs = append(q.mrs[:i], q.mrs[i+1:]...)
			break
		}
	}
	n := int(q.ctx.nmr)
	for i := 0; i < n; i++ {
		if uint32(q.ctx.mr[i].lkey) == m.lkey {
			q.ctx.mr[i] = q.ctx.mr[n-1]
			q.ctx.nmr--
			break
		}
	}
	e := C.rn_dereg_mr(m.mr)
	m.mr = nil
	if e != 0 {
		return fmt.Errorf("ibv_dereg_mr: %w", unix.Errno(e))
	}
	return nil
}

// CreateAH creates an address handle on the QP's PD. PortNum 0 means the
// bound port.
func (q *qp) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	if err := q.check("ibv_create_ah"); err != nil {
		return nil, err
	}
	if attr.PortNum == 0 {
		attr.PortNum = uint8(q.d.local.Port)
	}
	ca := ahAttrToC(attr)
	var e C.int
	p := C.rn_create_ah(q.pd, &ca, &e)
	if p == nil {
		return nil, fmt.Errorf("ibv_create_ah %s: %w", attr.DGID, unix.Errno(e))
	}
	a := &ah{q: q, ah: p, attr: attr}
	q.ahMu.Lock()
	q.ahs[a] = struct{}{}
	q.ahMu.Unlock()
	return a, nil
}

type ah struct {
	q    *qp
	ah   *C.struct_rn_ibv_ah
	attr verbs.AHAttr
}

func (a *ah) Attr() verbs.AHAttr { return a.attr }

func (a *ah) Close() error {
	a.q.ahMu.Lock()
	defer a.q.ahMu.Unlock()
	if a.ah == nil {
		return nil
	}
	delete(a.q.ahs, a)
	return a.destroy()
}

func (a *ah) destroy() error {
	if a.ah == nil {
		return nil
	}
	e := C.rn_destroy_ah(a.ah)
	a.ah = nil
	if e != 0 {
		return fmt.Errorf("ibv_destroy_ah: %w", unix.Errno(e))
	}
	return nil
}

// postErr wraps a post error: ENOMEM is a full work queue.
func postErr(verb string, e C.int) error {
	errno := unix.Errno(e)
	if errno == unix.ENOMEM {
		return fmt.Errorf("%s: %w (%w)", verb, errno, verbs.ErrQueueFull)
	}
	if errno == unix.EINVAL {
		return fmt.Errorf("%s: %w (SGE outside a registered arena or bad request)", verb, errno)
	}
	return fmt.Errorf("%s: %w", verb, errno)
}

// PostRecv posts receives, RN_BATCH per cgo crossing; verbs.RecvWR is
// read by C in place.
func (q *qp) PostRecv(wrs []verbs.RecvWR) (int, error) {
	if err := q.check("ibv_post_recv"); err != nil {
		return 0, err
	}
	q.mrMu.RLock()
	defer q.mrMu.RUnlock()
	total := 0
	for len(wrs) > 0 {
		n := min(len(wrs), batch)
		var posted C.int
		crossings.Add(1)
		e := C.rn_post_recv(q.ctx, C.int(n), (*C.struct_rn_recv_in)(unsafe.Pointer(&wrs[0])), &posted)
		total += int(posted)
		if e != 0 {
			return total, postErr("ibv_post_recv", e)
		}
		wrs = wrs[n:]
	}
	return total, nil
}

// PostSend posts UD sends, RN_BATCH per cgo crossing. A payload longer
// than the path MTU stops the batch there with ErrMessageSize. An inline
// payload (SendWR.Inline) is copied into C memory of the QP's and posted
// with IBV_SEND_INLINE, which copies it into the WQE; one longer than
// MaxInline stops the batch with EINVAL. An inline request by SGE longer
// than MaxInline is sent from the registered buffer.
func (q *qp) PostSend(wrs []verbs.SendWR) (int, error) {
	if err := q.check("ibv_post_send"); err != nil {
		return 0, err
	}
	q.sendMu.Lock()
	defer q.sendMu.Unlock()
	q.mrMu.RLock()
	defer q.mrMu.RUnlock()
	total := 0
	for total < len(wrs) {
		k, bad := q.fill(wrs[total:], total)
		if k > 0 {
			var posted C.int
			crossings.Add(1)
			e := C.rn_post_send(q.ctx, C.int(k), &q.sendBuf[0], &posted)
			total += int(posted)
			if e != 0 {
				return total, postErr("ibv_post_send", e)
			}
		}
		if bad != nil {
			return total, bad
		}
	}
	return total, nil
}

// PollPostSend polls the send CQ and posts wrs in one crossing
// (rn_poll_post_send; see verbs.QP). A batch of more than RN_BATCH, or one
// with a request PostSend would refuse, takes the two calls instead.
func (q *qp) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	if len(wcs) == 0 || len(wrs) == 0 || len(wrs) > batch {
		return verbs.PollThenPost(q, wcs, wrs)
	}
	if err := q.check("ibv_post_send"); err != nil {
		return 0, 0, err
	}
	q.sendMu.Lock()
	q.mrMu.RLock()
	k, bad := q.fill(wrs, 0)
	if bad != nil || k < len(wrs) {
		q.mrMu.RUnlock()
		q.sendMu.Unlock()
		return verbs.PollThenPost(q, wcs, wrs)
	}
	var polled, posted C.int
	crossings.Add(1)
	e := C.rn_poll_post_send(q.scq.cq, C.int(len(wcs)), (*C.struct_rn_wc_out)(unsafe.Pointer(&wcs[0])),
		q.ctx, C.int(k), &q.sendBuf[0], &polled, &posted)
	q.mrMu.RUnlock()
	q.sendMu.Unlock()
	if polled < 0 {
		return 0, 0, fmt.Errorf("ibv_poll_cq: %w", unix.Errno(-polled))
	}
	noteSendErrors(&q.sendErr, wcs[:polled])
	if e != 0 {
		return int(polled), int(posted), postErr("ibv_post_send", e)
	}
	return int(polled), int(posted), nil
}

// fill flattens wrs into sendBuf for rn_post_send, up to RN_BATCH of them,
// and returns how many; it stops at the first request that cannot be
// posted and returns why (base is wrs[0]'s index in the caller's batch,
// for the message). sendMu and mrMu are held.
func (q *qp) fill(wrs []verbs.SendWR, base int) (int, error) {
	k := 0
	for i := range wrs {
		if k == batch {
			break
		}
		w := &wrs[i]
		a, ok := w.AH.(*ah)
		inline := len(w.Inline) > 0 && w.Flags&verbs.SendInline != 0
		n := int(w.SGE.Length)
		if inline {
			n = len(w.Inline)
		}
		switch {
		case n > q.mtu:
			return k, fmt.Errorf("ibv_post_send: %d-byte payload over the %d-byte path MTU of %s: %w",
				n, q.mtu, q.d.local.Device, verbs.ErrMessageSize)
		case inline && n > q.inline:
			return k, fmt.Errorf("ibv_post_send: %d-byte inline payload over the QP's max inline %d: %w",
				n, q.inline, unix.EINVAL)
		case !ok || a == nil:
			return k, fmt.Errorf("ibv_post_send: send %d has no rdma-core AH: %w", base+i, unix.EINVAL)
		case a.ah == nil:
			return k, fmt.Errorf("ibv_post_send: send %d uses a destroyed AH: %w", base+i, verbs.ErrClosed)
		}
		flags := C.uint32_t(w.Flags)
		s := &q.sendBuf[k]
		s.addr = 0
		switch {
		case inline:
			// Copied here, into C memory, and by the provider into the WQE.
			dst := q.staged[k*q.inline:]
			copy(dst, w.Inline)
			s.addr = C.uint64_t(uintptr(unsafe.Pointer(&dst[0])))
			flags |= C.RN_SF_STAGED
		case flags&C.RN_SF_INLINE != 0 && n > q.inline:
			flags &^= C.RN_SF_INLINE // sent from the registered buffer
		}
		s.wr_id = C.uint64_t(w.WRID)
		s.ah = C.uint64_t(uintptr(unsafe.Pointer(a.ah)))
		s.off = C.uint32_t(w.SGE.Offset)
		s.len = C.uint32_t(n)
		s.lkey = C.uint32_t(w.SGE.LKey)
		s.remote_qpn = C.uint32_t(w.RemoteQPN)
		s.remote_qkey = C.uint32_t(w.RemoteQKey)
		s.imm = C.uint32_t(w.Imm)
		s.flags = flags
		k++
	}
	return k, nil
}
