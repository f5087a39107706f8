/*
 * shim.h: the C side of package rdmacore. libibverbs and librdmacm are
 * loaded with dlopen (see rn_load in load.go) into rn_lib; the helpers
 * below call through it. Helpers return 0 or an errno value, so Go never
 * needs to read errno itself. The data-path helpers (rn_post_recv,
 * rn_post_send, rn_poll, rn_get_cq_events) do a whole batch per call: one
 * cgo crossing per batch.
 */
#ifndef RDMANET_SHIM_H
#define RDMANET_SHIM_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include "rdma_abi.h"

/* The functions of libibverbs.so.1 and librdmacm.so.1 that rdmacore uses,
 * resolved by dlsym (the default symbol versions). */
struct rn_lib {
	void **(*ibv_get_device_list)(int *num);
	void (*ibv_free_device_list)(void **list);
	const char *(*ibv_get_device_name)(void *device);
	struct rn_ibv_context *(*ibv_open_device)(void *device);
	int (*ibv_close_device)(struct rn_ibv_context *ctx);
	int (*ibv_query_device)(struct rn_ibv_context *ctx, struct rn_ibv_device_attr *attr);
	/* exported IBVERBS_1.1 ibv_query_port: takes struct _compat_ibv_port_attr,
	 * a prefix of struct ibv_port_attr (everything but port_cap_flags2) */
	int (*ibv_query_port)(struct rn_ibv_context *ctx, uint8_t port, struct rn_ibv_port_attr *attr);
	struct rn_ibv_pd *(*ibv_alloc_pd)(struct rn_ibv_context *ctx);
	int (*ibv_dealloc_pd)(struct rn_ibv_pd *pd);
	struct rn_ibv_mr *(*ibv_reg_mr)(struct rn_ibv_pd *pd, void *addr, size_t len, int access);
	int (*ibv_dereg_mr)(struct rn_ibv_mr *mr);
	struct rn_ibv_comp_channel *(*ibv_create_comp_channel)(struct rn_ibv_context *ctx);
	int (*ibv_destroy_comp_channel)(struct rn_ibv_comp_channel *ch);
	struct rn_ibv_cq *(*ibv_create_cq)(struct rn_ibv_context *ctx, int cqe, void *cq_context,
					   struct rn_ibv_comp_channel *ch, int comp_vector);
	int (*ibv_destroy_cq)(struct rn_ibv_cq *cq);
	int (*ibv_get_cq_event)(struct rn_ibv_comp_channel *ch, struct rn_ibv_cq **cq, void **cq_context);
	void (*ibv_ack_cq_events)(struct rn_ibv_cq *cq, unsigned int n);
	int (*ibv_query_qp)(struct rn_ibv_qp *qp, struct rn_ibv_qp_attr *attr, int mask,
			    struct rn_ibv_qp_init_attr *init);
	int (*ibv_modify_qp)(struct rn_ibv_qp *qp, struct rn_ibv_qp_attr *attr, int mask);
	struct rn_ibv_ah *(*ibv_create_ah)(struct rn_ibv_pd *pd, struct rn_ibv_ah_attr *attr);
	int (*ibv_destroy_ah)(struct rn_ibv_ah *ah);
	int (*ibv_get_async_event)(struct rn_ibv_context *ctx, struct rn_ibv_async_event *ev);
	void (*ibv_ack_async_event)(struct rn_ibv_async_event *ev);

	struct rn_rdma_event_channel *(*rdma_create_event_channel)(void);
	void (*rdma_destroy_event_channel)(struct rn_rdma_event_channel *ch);
	int (*rdma_create_id)(struct rn_rdma_event_channel *ch, struct rn_rdma_cm_id **id,
			      void *context, int ps);
	int (*rdma_destroy_id)(struct rn_rdma_cm_id *id);
	int (*rdma_bind_addr)(struct rn_rdma_cm_id *id, struct sockaddr *addr);
	int (*rdma_create_qp_ex)(struct rn_rdma_cm_id *id, struct rn_ibv_qp_init_attr_ex *attr);
	void (*rdma_destroy_qp)(struct rn_rdma_cm_id *id);
	int (*rdma_join_multicast)(struct rn_rdma_cm_id *id, struct sockaddr *addr, void *context);
	/* optional: librdmacm >= 1.1 (rdma-core 17) */
	int (*rdma_join_multicast_ex)(struct rn_rdma_cm_id *id,
				      struct rn_rdma_cm_join_mc_attr_ex *attr, void *context);
	int (*rdma_leave_multicast)(struct rn_rdma_cm_id *id, struct sockaddr *addr);
	int (*rdma_get_cm_event)(struct rn_rdma_event_channel *ch, struct rn_rdma_cm_event **ev);
	int (*rdma_ack_cm_event)(struct rn_rdma_cm_event *ev);
	struct rn_ibv_context **(*rdma_get_devices)(int *num);
	void (*rdma_free_devices)(struct rn_ibv_context **list);
};

extern struct rn_lib rn_lib;
int rn_load(char *err, size_t errlen);

/* errno of a call that returned r: r itself when positive (the verbs that
 * return an errno value), else errno, else EIO. */
static inline int rn_err(int r)
{
	if (r > 0)
		return r;
	return errno ? errno : EIO;
}

/* ---- devices ---- */

static inline void **rn_get_device_list(int *n, int *err)
{
	errno = 0;
	void **l = rn_lib.ibv_get_device_list(n);
	if (!l)
		*err = rn_err(0);
	return l;
}

static inline void *rn_device_at(void **list, int i) { return list[i]; }

static inline const char *rn_device_name(void *dev) { return rn_lib.ibv_get_device_name(dev); }

static inline struct rn_ibv_context *rn_open_device(void *dev, int *err)
{
	errno = 0;
	struct rn_ibv_context *c = rn_lib.ibv_open_device(dev);
	if (!c)
		*err = rn_err(0);
	return c;
}

static inline int rn_query_device(struct rn_ibv_context *ctx, struct rn_ibv_device_attr *a)
{
	errno = 0;
	int r = rn_lib.ibv_query_device(ctx, a);
	return r ? rn_err(r) : 0;
}

static inline int rn_query_port(struct rn_ibv_context *ctx, int port, struct rn_ibv_port_attr *a)
{
	memset(a, 0, sizeof(*a));
	errno = 0;
	int r = rn_lib.ibv_query_port(ctx, (uint8_t)port, a);
	return r ? rn_err(r) : 0;
}

/* ---- connection manager ---- */

static inline struct rn_rdma_event_channel *rn_create_event_channel(int *err)
{
	errno = 0;
	struct rn_rdma_event_channel *ch = rn_lib.rdma_create_event_channel();
	if (!ch)
		*err = rn_err(0);
	return ch;
}

static inline int rn_create_id(struct rn_rdma_event_channel *ch, struct rn_rdma_cm_id **id)
{
	errno = 0;
	return rn_lib.rdma_create_id(ch, id, NULL, RN_RDMA_PS_UDP) ? rn_err(0) : 0;
}

static inline int rn_bind_addr(struct rn_rdma_cm_id *id, void *sa)
{
	errno = 0;
	return rn_lib.rdma_bind_addr(id, (struct sockaddr *)sa) ? rn_err(0) : 0;
}

static inline int rn_destroy_id(struct rn_rdma_cm_id *id)
{
	errno = 0;
	return rn_lib.rdma_destroy_id(id) ? rn_err(0) : 0;
}

static inline int rn_join(struct rn_rdma_cm_id *id, void *sa, int sendonly, uintptr_t tag)
{
	errno = 0;
	if (rn_lib.rdma_join_multicast_ex) {
		struct rn_rdma_cm_join_mc_attr_ex a = {
			.comp_mask = RN_RDMA_CM_JOIN_MC_ATTR_ADDRESS | RN_RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
			.join_flags = sendonly ? RN_RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER
					       : RN_RDMA_MC_JOIN_FLAG_FULLMEMBER,
			.addr = (struct sockaddr *)sa,
		};
		return rn_lib.rdma_join_multicast_ex(id, &a, (void *)tag) ? rn_err(0) : 0;
	}
	if (sendonly)
		return EOPNOTSUPP;
	return rn_lib.rdma_join_multicast(id, (struct sockaddr *)sa, (void *)tag) ? rn_err(0) : 0;
}

static inline int rn_leave(struct rn_rdma_cm_id *id, void *sa)
{
	errno = 0;
	return rn_lib.rdma_leave_multicast(id, (struct sockaddr *)sa) ? rn_err(0) : 0;
}

/* One CM event, copied out and already acknowledged. */
struct rn_cm_event {
	int event;
	int status;
	uint64_t tag; /* the join's context (param.ud.private_data) */
	struct rn_ibv_ah_attr ah_attr;
	uint32_t qp_num;
	uint32_t qkey;
};

/* rn_get_cm_event reads one event (EAGAIN when none: the channel fd is
 * non-blocking), copies it out and acks it at once, so that
 * rdma_leave_multicast and rdma_destroy_id never wait for it. */
static inline int rn_get_cm_event(struct rn_rdma_event_channel *ch, struct rn_cm_event *out)
{
	struct rn_rdma_cm_event *ev;
	errno = 0;
	if (rn_lib.rdma_get_cm_event(ch, &ev))
		return rn_err(0);
	out->event = ev->event;
	out->status = ev->status;
	out->tag = (uint64_t)(uintptr_t)ev->param.ud.private_data;
	if (ev->event == RN_RDMA_CM_EVENT_MULTICAST_JOIN) {
		out->ah_attr = ev->param.ud.ah_attr;
		out->qp_num = ev->param.ud.qp_num;
		out->qkey = ev->param.ud.qkey;
	} else {
		memset(&out->ah_attr, 0, sizeof(out->ah_attr));
		out->qp_num = 0;
		out->qkey = 0;
	}
	rn_lib.rdma_ack_cm_event(ev);
	return 0;
}

/* rn_sync_devices makes librdmacm look at the device list again
 * (rdma_get_devices): it closes the verbs context it keeps for a removed
 * device only then, and until it does the kernel cannot finish removing
 * the device. */
static inline void rn_sync_devices(void)
{
	if (!rn_lib.rdma_get_devices || !rn_lib.rdma_free_devices)
		return;
	struct rn_ibv_context **l = rn_lib.rdma_get_devices(NULL);
	if (l)
		rn_lib.rdma_free_devices(l);
}

/* ---- QP, CQ, PD, MR, AH ---- */

static inline struct rn_ibv_pd *rn_alloc_pd(struct rn_ibv_context *ctx, int *err)
{
	errno = 0;
	struct rn_ibv_pd *pd = rn_lib.ibv_alloc_pd(ctx);
	if (!pd)
		*err = rn_err(0);
	return pd;
}

static inline struct rn_ibv_comp_channel *rn_create_comp_channel(struct rn_ibv_context *ctx, int *err)
{
	errno = 0;
	struct rn_ibv_comp_channel *ch = rn_lib.ibv_create_comp_channel(ctx);
	if (!ch)
		*err = rn_err(0);
	return ch;
}

static inline struct rn_ibv_cq *rn_create_cq(struct rn_ibv_context *ctx, int cqe,
					     struct rn_ibv_comp_channel *ch, int *err)
{
	errno = 0;
	struct rn_ibv_cq *cq = rn_lib.ibv_create_cq(ctx, cqe, NULL, ch, 0);
	if (!cq)
		*err = rn_err(0);
	return cq;
}

/* rn_create_qp creates the UD QP on the cm id (rdma_create_qp_ex: librdmacm
 * moves it to RTS and attaches it on joins), with create_flags when
 * non-zero. cap is in/out: the granted capabilities. */
static inline int rn_create_qp(struct rn_rdma_cm_id *id, struct rn_ibv_pd *pd,
			       struct rn_ibv_cq *scq, struct rn_ibv_cq *rcq,
			       struct rn_ibv_qp_cap *cap, uint32_t create_flags)
{
	struct rn_ibv_qp_init_attr_ex a;
	memset(&a, 0, sizeof(a));
	a.send_cq = scq;
	a.recv_cq = rcq;
	a.cap = *cap;
	a.qp_type = RN_IBV_QPT_UD;
	a.comp_mask = RN_IBV_QP_INIT_ATTR_PD;
	a.pd = pd;
	if (create_flags) {
		a.comp_mask |= RN_IBV_QP_INIT_ATTR_CREATE_FLAGS;
		a.create_flags = create_flags;
	}
	errno = 0;
	if (rn_lib.rdma_create_qp_ex(id, &a))
		return rn_err(0);
	*cap = a.cap;
	return 0;
}

static inline int rn_query_qp_state(struct rn_ibv_qp *qp, int *state, uint32_t *qkey)
{
	struct rn_ibv_qp_attr a;
	struct rn_ibv_qp_init_attr init;
	memset(&a, 0, sizeof(a));
	errno = 0;
	int r = rn_lib.ibv_query_qp(qp, &a, RN_IBV_QP_STATE | RN_IBV_QP_QKEY, &init);
	if (r)
		return rn_err(r);
	*state = a.qp_state;
	*qkey = a.qkey;
	return 0;
}

static inline int rn_set_qkey(struct rn_ibv_qp *qp, uint32_t qkey)
{
	struct rn_ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qkey = qkey;
	errno = 0;
	int r = rn_lib.ibv_modify_qp(qp, &a, RN_IBV_QP_QKEY);
	return r ? rn_err(r) : 0;
}

/* rn_reset_qp takes a UD QP from any state (ERR after a link went down)
 * back to RTS as librdmacm's ucma_init_ud_qp does: RESET, INIT with the
 * P_Key index, port and Q_Key it had, RTR, RTS (SQ PSN 0). Posted
 * receives and sends are gone after RESET. */
static inline int rn_reset_qp(struct rn_ibv_qp *qp, int port)
{
	struct rn_ibv_qp_attr a, cur;
	struct rn_ibv_qp_init_attr init;
	int r;

	memset(&cur, 0, sizeof(cur));
	errno = 0;
	if ((r = rn_lib.ibv_query_qp(qp, &cur, RN_IBV_QP_PKEY_INDEX | RN_IBV_QP_PORT | RN_IBV_QP_QKEY, &init)) != 0)
		return rn_err(r);
	if (!cur.port_num)
		cur.port_num = (uint8_t)port;
	memset(&a, 0, sizeof(a));
	a.qp_state = RN_IBV_QPS_RESET;
	if ((r = rn_lib.ibv_modify_qp(qp, &a, RN_IBV_QP_STATE)) != 0)
		return rn_err(r);
	memset(&a, 0, sizeof(a));
	a.qp_state = RN_IBV_QPS_INIT;
	a.pkey_index = cur.pkey_index;
	a.port_num = cur.port_num;
	a.qkey = cur.qkey;
	if ((r = rn_lib.ibv_modify_qp(qp, &a, RN_IBV_QP_STATE | RN_IBV_QP_PKEY_INDEX | RN_IBV_QP_PORT | RN_IBV_QP_QKEY)) != 0)
		return rn_err(r);
	memset(&a, 0, sizeof(a));
	a.qp_state = RN_IBV_QPS_RTR;
	if ((r = rn_lib.ibv_modify_qp(qp, &a, RN_IBV_QP_STATE)) != 0)
		return rn_err(r);
	memset(&a, 0, sizeof(a));
	a.qp_state = RN_IBV_QPS_RTS;
	a.sq_psn = 0;
	if ((r = rn_lib.ibv_modify_qp(qp, &a, RN_IBV_QP_STATE | RN_IBV_QP_SQ_PSN)) != 0)
		return rn_err(r);
	return 0;
}

/* One asynchronous event of a device context, copied out and already
 * acknowledged (ibv_destroy_qp waits for the acks of its events). */
struct rn_async_event {
	int type;
	int port;	/* port events */
	uintptr_t qp;	/* QP events: the struct ibv_qp's address */
};

/* rn_get_async_event reads one event from the context's (non-blocking)
 * async fd: EAGAIN when none. */
static inline int rn_get_async_event(struct rn_ibv_context *ctx, struct rn_async_event *out)
{
	struct rn_ibv_async_event ev;
	errno = 0;
	if (rn_lib.ibv_get_async_event(ctx, &ev))
		return rn_err(0);
	out->type = ev.event_type;
	out->port = 0;
	out->qp = 0;
	switch (ev.event_type) {
	case RN_IBV_EVENT_QP_FATAL:
	case RN_IBV_EVENT_QP_REQ_ERR:
	case RN_IBV_EVENT_QP_ACCESS_ERR:
		out->qp = (uintptr_t)ev.element.qp;
		break;
	case RN_IBV_EVENT_PORT_ACTIVE:
	case RN_IBV_EVENT_PORT_ERR:
	case RN_IBV_EVENT_GID_CHANGE:
		out->port = ev.element.port_num;
		break;
	}
	rn_lib.ibv_ack_async_event(&ev);
	return 0;
}

static inline int rn_async_fd(struct rn_ibv_context *ctx) { return ctx->async_fd; }

static inline struct rn_ibv_mr *rn_reg_mr(struct rn_ibv_pd *pd, uintptr_t addr, size_t len, int *err)
{
	errno = 0;
	struct rn_ibv_mr *mr = rn_lib.ibv_reg_mr(pd, (void *)addr, len, RN_IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		*err = rn_err(0);
	return mr;
}

static inline struct rn_ibv_ah *rn_create_ah(struct rn_ibv_pd *pd, struct rn_ibv_ah_attr *a, int *err)
{
	errno = 0;
	struct rn_ibv_ah *ah = rn_lib.ibv_create_ah(pd, a);
	if (!ah)
		*err = rn_err(0);
	return ah;
}

/* Destructors: 0 or errno. */
static inline int rn_destroy_ah(struct rn_ibv_ah *ah) { errno = 0; int r = rn_lib.ibv_destroy_ah(ah); return r ? rn_err(r) : 0; }
static inline int rn_dereg_mr(struct rn_ibv_mr *mr) { errno = 0; int r = rn_lib.ibv_dereg_mr(mr); return r ? rn_err(r) : 0; }
static inline int rn_destroy_cq(struct rn_ibv_cq *cq) { errno = 0; int r = rn_lib.ibv_destroy_cq(cq); return r ? rn_err(r) : 0; }
static inline int rn_destroy_comp_channel(struct rn_ibv_comp_channel *ch) { errno = 0; int r = rn_lib.ibv_destroy_comp_channel(ch); return r ? rn_err(r) : 0; }
static inline int rn_dealloc_pd(struct rn_ibv_pd *pd) { errno = 0; int r = rn_lib.ibv_dealloc_pd(pd); return r ? rn_err(r) : 0; }
static inline void rn_destroy_qp(struct rn_rdma_cm_id *id) { rn_lib.rdma_destroy_qp(id); }
static inline void rn_destroy_event_channel(struct rn_rdma_event_channel *ch) { rn_lib.rdma_destroy_event_channel(ch); }
static inline int rn_close_device(struct rn_ibv_context *c) { errno = 0; int r = rn_lib.ibv_close_device(c); return r ? rn_err(r) : 0; }
static inline void rn_free_device_list(void **l) { rn_lib.ibv_free_device_list(l); }

/* ---- data path ---- */

enum { RN_BATCH = 64, RN_MAX_MR = 16 };

/* The MRs of one QP: SGE offsets are translated to addresses here. */
struct rn_mrent {
	uint32_t lkey;
	uint32_t _pad;
	uint64_t addr;
	uint64_t len;
};

struct rn_qpctx {
	struct rn_ibv_qp *qp;
	int nmr;
	struct rn_mrent mr[RN_MAX_MR];
};

/* Mirrors verbs.RecvWR (checked in Go). */
struct rn_recv_in {
	uint64_t wr_id;
	uint32_t off;
	uint32_t len;
	uint32_t lkey;
	uint32_t _pad;
};

/* A send request flattened by Go (no Go pointers: ah is a C address). */
struct rn_send_in {
	uint64_t wr_id;
	uint64_t ah;
	uint32_t off;
	uint32_t len;
	uint32_t lkey;
	uint32_t remote_qpn;
	uint32_t remote_qkey;
	uint32_t imm;	/* host value; sent in network byte order */
	uint32_t flags; /* verbs.SendFlags, and RN_SF_STAGED */
	uint32_t _pad;
	uint64_t addr; /* RN_SF_STAGED: the inline payload's address */
};

/* Mirrors verbs.WC (checked in Go). */
struct rn_wc_out {
	uint64_t wr_id;
	int64_t status;
	uint8_t opcode;
	uint8_t flags;
	uint8_t sl;
	uint8_t _pad;
	uint32_t byte_len;
	uint32_t imm; /* host value of the network-order imm_data */
	uint32_t qp_num;
	uint32_t src_qp;
	uint16_t slid;
	uint16_t pkey_index;
	uint32_t err_no; /* verbs.WC.Errno: devices give none (0) */
};

/* verbs.SendFlags and verbs.WCFlags bits. */
enum {
	RN_SF_SIGNALED = 1,
	RN_SF_INLINE = 2,
	RN_SF_SOLICITED = 4,
	RN_SF_WITH_IMM = 8,
	RN_SF_STAGED = 0x80, /* an inline payload at addr: no MR, lkey unused */
	RN_WCF_GRH = 1,
	RN_WCF_WITH_IMM = 2,
};

static inline int rn_sge(const struct rn_qpctx *q, uint32_t lkey, uint32_t off, uint32_t len,
			 struct rn_ibv_sge *sge)
{
	for (int i = 0; i < q->nmr; i++) {
		const struct rn_mrent *m = &q->mr[i];
		if (m->lkey != lkey)
			continue;
		if ((uint64_t)off + len > m->len)
			return EINVAL;
		sge->addr = m->addr + off;
		sge->length = len;
		sge->lkey = lkey;
		return 0;
	}
	return EINVAL;
}

/* rn_post_recv posts n <= RN_BATCH receives in one ibv_post_recv. It
 * returns 0 or the errno of the first request not posted; *posted says
 * how many were. */
static int rn_post_recv(struct rn_qpctx *q, int n, const struct rn_recv_in *in, int *posted)
{
	struct rn_ibv_recv_wr wr[RN_BATCH], *bad = NULL;
	struct rn_ibv_sge sge[RN_BATCH];
	int i, err = 0;

	*posted = 0;
	if (n > RN_BATCH)
		n = RN_BATCH;
	for (i = 0; i < n; i++) {
		err = rn_sge(q, in[i].lkey, in[i].off, in[i].len, &sge[i]);
		if (err)
			break;
		wr[i].wr_id = in[i].wr_id;
		wr[i].next = &wr[i + 1];
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
	}
	if (i == 0)
		return err;
	wr[i - 1].next = NULL;
	int r = q->qp->context->ops.post_recv(q->qp, wr, &bad);
	if (r) {
		*posted = bad ? (int)(bad - wr) : 0;
		return r > 0 ? r : EIO;
	}
	*posted = i;
	return err;
}

/* rn_post_send: like rn_post_recv, for UD sends. */
static int rn_post_send(struct rn_qpctx *q, int n, const struct rn_send_in *in, int *posted)
{
	struct rn_ibv_send_wr wr[RN_BATCH], *bad = NULL;
	struct rn_ibv_sge sge[RN_BATCH];
	int i, err = 0;

	*posted = 0;
	if (n > RN_BATCH)
		n = RN_BATCH;
	for (i = 0; i < n; i++) {
		const struct rn_send_in *s = &in[i];
		if (s->flags & RN_SF_STAGED) {
			sge[i].addr = s->addr;
			sge[i].length = s->len;
			sge[i].lkey = 0;
		} else if ((err = rn_sge(q, s->lkey, s->off, s->len, &sge[i])) != 0) {
			break;
		}
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = s->wr_id;
		wr[i].next = &wr[i + 1];
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = (s->flags & RN_SF_WITH_IMM) ? RN_IBV_WR_SEND_WITH_IMM : RN_IBV_WR_SEND;
		if (s->flags & RN_SF_WITH_IMM)
			wr[i].imm_data = htonl(s->imm);
		wr[i].send_flags = ((s->flags & RN_SF_SIGNALED) ? RN_IBV_SEND_SIGNALED : 0) |
				   ((s->flags & RN_SF_INLINE) ? RN_IBV_SEND_INLINE : 0) |
				   ((s->flags & RN_SF_SOLICITED) ? RN_IBV_SEND_SOLICITED : 0);
		wr[i].wr.ud.ah = (struct rn_ibv_ah *)(uintptr_t)s->ah;
		wr[i].wr.ud.remote_qpn = s->remote_qpn;
		wr[i].wr.ud.remote_qkey = s->remote_qkey;
	}
	if (i == 0)
		return err;
	wr[i - 1].next = NULL;
	int r = q->qp->context->ops.post_send(q->qp, wr, &bad);
	if (r) {
		*posted = bad ? (int)(bad - wr) : 0;
		return r > 0 ? r : EIO;
	}
	*posted = i;
	return err;
}

/* rn_poll polls up to n completions into out (Go memory laid out as
 * verbs.WC); it returns how many, or -errno. */
static int rn_poll(struct rn_ibv_cq *cq, int n, struct rn_wc_out *out)
{
	struct rn_ibv_wc wc[32];
	int got = 0;

	while (got < n) {
		int want = n - got < 32 ? n - got : 32;
		int k = cq->context->ops.poll_cq(cq, want, wc);
		if (k < 0)
			return got ? got : -EIO;
		for (int i = 0; i < k; i++) {
			struct rn_wc_out *o = &out[got + i];
			o->wr_id = wc[i].wr_id;
			o->status = wc[i].status;
			o->opcode = (wc[i].opcode & RN_IBV_WC_RECV) ? RN_IBV_WC_RECV : (uint8_t)wc[i].opcode;
			o->flags = ((wc[i].wc_flags & RN_IBV_WC_GRH) ? RN_WCF_GRH : 0) |
				   ((wc[i].wc_flags & RN_IBV_WC_WITH_IMM) ? RN_WCF_WITH_IMM : 0);
			o->sl = wc[i].sl;
			o->_pad = 0;
			o->byte_len = wc[i].byte_len;
			o->imm = (wc[i].wc_flags & RN_IBV_WC_WITH_IMM) ? ntohl(wc[i].imm_data) : 0;
			o->qp_num = wc[i].qp_num;
			o->src_qp = wc[i].src_qp;
			o->slid = wc[i].slid;
			o->pkey_index = wc[i].pkey_index;
			o->err_no = 0;
		}
		got += k;
		if (k < want)
			break;
	}
	return got;
}

/* rn_poll_post_send is a write's reap and post in one crossing: it polls
 * the send CQ into out (up to nwc) and then, only when that found fewer
 * than nwc completions and all of them succeeded, posts the n sends as
 * rn_post_send. *polled is how many were polled, or -errno when the poll
 * failed (nothing posted); the result and *posted are rn_post_send's (0
 * and 0 when it did not post). */
static int rn_poll_post_send(struct rn_ibv_cq *cq, int nwc, struct rn_wc_out *out,
			     struct rn_qpctx *q, int n, const struct rn_send_in *in,
			     int *polled, int *posted)
{
	*posted = 0;
	*polled = rn_poll(cq, nwc, out);
	if (*polled < 0 || *polled == nwc)
		return 0;
	for (int i = 0; i < *polled; i++)
		if (out[i].status != 0)
			return 0;
	return rn_post_send(q, n, in, posted);
}

static inline int rn_req_notify(struct rn_ibv_cq *cq)
{
	int r = cq->context->ops.req_notify_cq(cq, 0);
	return r ? (r > 0 ? r : EIO) : 0;
}

/* rn_get_cq_events drains the (non-blocking) channel: ibv_get_cq_event
 * until EAGAIN, or until max events were read when max > 0 (the caller
 * knows no more can be there). *n is how many were read; they must be
 * acked. */
static int rn_get_cq_events(struct rn_ibv_comp_channel *ch, int max, int *n)
{
	struct rn_ibv_cq *cq;
	void *ctx;

	*n = 0;
	while (max <= 0 || *n < max) {
		errno = 0;
		if (rn_lib.ibv_get_cq_event(ch, &cq, &ctx)) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return rn_err(0);
		}
		(*n)++;
	}
	return 0;
}

static inline void rn_ack_cq_events(struct rn_ibv_cq *cq, unsigned int n) { rn_lib.ibv_ack_cq_events(cq, n); }

#endif
