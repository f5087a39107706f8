//go:build linux && cgo

package rdmacore

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>
#include "shim.h"

struct rn_lib rn_lib;

// rn_load dlopens libibverbs.so.1 and librdmacm.so.1 and resolves every
// function rdmacore calls. 0 on success, else -1 with a message in err.
int rn_load(char *err, size_t errlen)
{
	void *v, *cm;
	v = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!v) {
		snprintf(err, errlen, "dlopen libibverbs.so.1: %s", dlerror());
		return -1;
	}
	cm = dlopen("librdmacm.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!cm) {
		snprintf(err, errlen, "dlopen librdmacm.so.1: %s", dlerror());
		return -1;
	}
#define SYM(h, name, required)                                                   \
	do {                                                                     \
		*(void **)&rn_lib.name = dlsym(h, #name);                        \
		if (!rn_lib.name && required) {                                  \
			snprintf(err, errlen, "dlsym %s: %s", #name, dlerror()); \
			return -1;                                               \
		}                                                                \
	} while (0)
	SYM(v, ibv_get_device_list, 1);
	SYM(v, ibv_free_device_list, 1);
	SYM(v, ibv_get_device_name, 1);
	SYM(v, ibv_open_device, 1);
	SYM(v, ibv_close_device, 1);
	SYM(v, ibv_query_device, 1);
	SYM(v, ibv_query_port, 1);
	SYM(v, ibv_alloc_pd, 1);
	SYM(v, ibv_dealloc_pd, 1);
	SYM(v, ibv_reg_mr, 1);
	SYM(v, ibv_dereg_mr, 1);
	SYM(v, ibv_create_comp_channel, 1);
	SYM(v, ibv_destroy_comp_channel, 1);
	SYM(v, ibv_create_cq, 1);
	SYM(v, ibv_destroy_cq, 1);
	SYM(v, ibv_get_cq_event, 1);
	SYM(v, ibv_ack_cq_events, 1);
	SYM(v, ibv_query_qp, 1);
	SYM(v, ibv_modify_qp, 1);
	SYM(v, ibv_create_ah, 1);
	SYM(v, ibv_destroy_ah, 1);
	SYM(v, ibv_get_async_event, 1);
	SYM(v, ibv_ack_async_event, 1);
	SYM(cm, rdma_create_event_channel, 1);
	SYM(cm, rdma_destroy_event_channel, 1);
	SYM(cm, rdma_create_id, 1);
	SYM(cm, rdma_destroy_id, 1);
	SYM(cm, rdma_bind_addr, 1);
	SYM(cm, rdma_create_qp_ex, 1);
	SYM(cm, rdma_destroy_qp, 1);
	SYM(cm, rdma_join_multicast, 1);
	SYM(cm, rdma_join_multicast_ex, 0);
	SYM(cm, rdma_leave_multicast, 1);
	SYM(cm, rdma_get_cm_event, 1);
	SYM(cm, rdma_ack_cm_event, 1);
	SYM(cm, rdma_get_devices, 0);
	SYM(cm, rdma_free_devices, 0);
#undef SYM
	return 0;
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// installHint is how to get rdma-core.
const installHint = "install rdma-core: apt-get install libibverbs1 librdmacm1 ibverbs-providers"

var (
	loadOnce sync.Once
	loadErr  error
)

// load dlopens rdma-core once.
func load() error {
	loadOnce.Do(func() {
		if err := checkLayouts(); err != nil {
			loadErr = fmt.Errorf("rdmacore: %v: %w", err, verbs.ErrUnavailable)
			return
		}
		var buf [512]C.char
		if C.rn_load(&buf[0], C.size_t(len(buf))) != 0 {
			loadErr = fmt.Errorf("rdmacore: %s (%s): %w", C.GoString(&buf[0]), installHint, verbs.ErrUnavailable)
		}
	})
	return loadErr
}

// checkLayouts proves that the C structs the data path writes into Go
// memory (verbs.WC) or reads from it (verbs.RecvWR) have Go's layout.
func checkLayouts() error {
	var wc verbs.WC
	var cw C.struct_rn_wc_out
	var rw verbs.RecvWR
	var cr C.struct_rn_recv_in
	type pair struct {
		name      string
		got, want uintptr
	}
	for _, p := range []pair{
		{"sizeof WC", unsafe.Sizeof(wc), unsafe.Sizeof(cw)},
		{"WC.WRID", unsafe.Offsetof(wc.WRID), unsafe.Offsetof(cw.wr_id)},
		{"WC.Status", unsafe.Offsetof(wc.Status), unsafe.Offsetof(cw.status)},
		{"sizeof WC.Status", unsafe.Sizeof(wc.Status), unsafe.Sizeof(cw.status)},
		{"WC.Opcode", unsafe.Offsetof(wc.Opcode), unsafe.Offsetof(cw.opcode)},
		{"WC.Flags", unsafe.Offsetof(wc.Flags), unsafe.Offsetof(cw.flags)},
		{"WC.SL", unsafe.Offsetof(wc.SL), unsafe.Offsetof(cw.sl)},
		{"WC.ByteLen", unsafe.Offsetof(wc.ByteLen), unsafe.Offsetof(cw.byte_len)},
		{"WC.Imm", unsafe.Offsetof(wc.Imm), unsafe.Offsetof(cw.imm)},
		{"WC.QPN", unsafe.Offsetof(wc.QPN), unsafe.Offsetof(cw.qp_num)},
		{"WC.SrcQP", unsafe.Offsetof(wc.SrcQP), unsafe.Offsetof(cw.src_qp)},
		{"WC.SLID", unsafe.Offsetof(wc.SLID), unsafe.Offsetof(cw.slid)},
		{"WC.PKeyIdx", unsafe.Offsetof(wc.PKeyIdx), unsafe.Offsetof(cw.pkey_index)},
		{"WC.Errno", unsafe.Offsetof(wc.Errno), unsafe.Offsetof(cw.err_no)},
		{"sizeof RecvWR", unsafe.Sizeof(rw), unsafe.Sizeof(cr)},
		{"RecvWR.WRID", unsafe.Offsetof(rw.WRID), unsafe.Offsetof(cr.wr_id)},
		{"RecvWR.SGE.Offset", unsafe.Offsetof(rw.SGE) + unsafe.Offsetof(rw.SGE.Offset), unsafe.Offsetof(cr.off)},
		{"RecvWR.SGE.Length", unsafe.Offsetof(rw.SGE) + unsafe.Offsetof(rw.SGE.Length), unsafe.Offsetof(cr.len)},
		{"RecvWR.SGE.LKey", unsafe.Offsetof(rw.SGE) + unsafe.Offsetof(rw.SGE.LKey), unsafe.Offsetof(cr.lkey)},
	} {
		if p.got != p.want {
			return fmt.Errorf("layout of verbs.%s is %d, C side %d: unsupported platform", p.name, p.got, p.want)
		}
	}
	return nil
}
