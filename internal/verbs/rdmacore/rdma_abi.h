/*
 * rdma_abi.h: the part of rdma-core's ABI (libibverbs 1.1, librdmacm 1) that
 * package rdmacore uses, declared here so that the package builds without
 * rdma-core's headers. Every struct mirrors the one named in its comment,
 * member for member; abi_test.go compiles testdata/abicheck.c against the
 * real <infiniband/verbs.h> and <rdma/rdma_cma.h>, where installed, and
 * compares sizeof and offsetof of every member used here.
 *
 * Names carry an rn_ prefix so the check can include both headers.
 */
#ifndef RDMANET_RDMA_ABI_H
#define RDMANET_RDMA_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/socket.h>
#include <netinet/in.h>

/* union ibv_gid */
union rn_ibv_gid {
	uint8_t raw[16];
	struct {
		uint64_t subnet_prefix;
		uint64_t interface_id;
	} global;
};

struct rn_ibv_context;
struct rn_ibv_cq;
struct rn_ibv_qp;
struct rn_ibv_wc;
struct rn_ibv_send_wr;
struct rn_ibv_recv_wr;

/* struct ibv_context_ops: 32 function pointers; only the data-path ones
 * that verbs.h calls from static inline functions are named. */
struct rn_ibv_context_ops {
	void *_r0[11];
	int (*poll_cq)(struct rn_ibv_cq *cq, int num_entries, struct rn_ibv_wc *wc);
	int (*req_notify_cq)(struct rn_ibv_cq *cq, int solicited_only);
	void *_r1[12];
	int (*post_send)(struct rn_ibv_qp *qp, struct rn_ibv_send_wr *wr,
			 struct rn_ibv_send_wr **bad_wr);
	int (*post_recv)(struct rn_ibv_qp *qp, struct rn_ibv_recv_wr *wr,
			 struct rn_ibv_recv_wr **bad_wr);
	void *_r2[5];
};

/* struct ibv_context */
struct rn_ibv_context {
	void *device; /* struct ibv_device *: use ibv_get_device_name */
	struct rn_ibv_context_ops ops;
	int cmd_fd;
	int async_fd;
	int num_comp_vectors;
	pthread_mutex_t mutex;
	void *abi_compat;
};

/* struct ibv_device_attr */
struct rn_ibv_device_attr {
	char fw_ver[64];
	uint64_t node_guid; /* big endian */
	uint64_t sys_image_guid;
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	int max_qp;
	int max_qp_wr;
	unsigned int device_cap_flags;
	int max_sge;
	int max_sge_rd;
	int max_cq;
	int max_cqe;
	int max_mr;
	int max_pd;
	int max_qp_rd_atom;
	int max_ee_rd_atom;
	int max_res_rd_atom;
	int max_qp_init_rd_atom;
	int max_ee_init_rd_atom;
	int atomic_cap;
	int max_ee;
	int max_rdd;
	int max_mw;
	int max_raw_ipv6_qp;
	int max_raw_ethy_qp;
	int max_mcast_grp;
	int max_mcast_qp_attach;
	int max_total_mcast_qp_attach;
	int max_ah;
	int max_fmr;
	int max_map_per_fmr;
	int max_srq;
	int max_srq_wr;
	int max_srq_sge;
	uint16_t max_pkeys;
	uint8_t local_ca_ack_delay;
	uint8_t phys_port_cnt;
};

/* struct ibv_port_attr. The exported ibv_query_port (IBVERBS_1.1) fills
 * the members up to flags (struct _compat_ibv_port_attr) and leaves
 * port_cap_flags2 alone. */
struct rn_ibv_port_attr {
	int state;
	int max_mtu;
	int active_mtu;
	int gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t flags;
	uint16_t port_cap_flags2;
};

/* struct ibv_comp_channel */
struct rn_ibv_comp_channel {
	struct rn_ibv_context *context;
	int fd;
	int refcnt;
};

/* struct ibv_pd */
struct rn_ibv_pd {
	struct rn_ibv_context *context;
	uint32_t handle;
};

/* struct ibv_mr */
struct rn_ibv_mr {
	struct rn_ibv_context *context;
	struct rn_ibv_pd *pd;
	void *addr;
	size_t length;
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;
};

/* struct ibv_ah */
struct rn_ibv_ah {
	struct rn_ibv_context *context;
	struct rn_ibv_pd *pd;
	uint32_t handle;
};

/* struct ibv_cq */
struct rn_ibv_cq {
	struct rn_ibv_context *context;
	struct rn_ibv_comp_channel *channel;
	void *cq_context;
	uint32_t handle;
	int cqe;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t comp_events_completed;
	uint32_t async_events_completed;
};

/* struct ibv_qp */
struct rn_ibv_qp {
	struct rn_ibv_context *context;
	void *qp_context;
	struct rn_ibv_pd *pd;
	struct rn_ibv_cq *send_cq;
	struct rn_ibv_cq *recv_cq;
	void *srq;
	uint32_t handle;
	uint32_t qp_num;
	int state;
	int qp_type;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t events_completed;
};

/* struct ibv_global_route */
struct rn_ibv_global_route {
	union rn_ibv_gid dgid;
	uint32_t flow_label;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
};

/* struct ibv_ah_attr */
struct rn_ibv_ah_attr {
	struct rn_ibv_global_route grh;
	uint16_t dlid;
	uint8_t sl;
	uint8_t src_path_bits;
	uint8_t static_rate;
	uint8_t is_global;
	uint8_t port_num;
};

/* struct ibv_qp_cap */
struct rn_ibv_qp_cap {
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
};

/* struct ibv_qp_init_attr */
struct rn_ibv_qp_init_attr {
	void *qp_context;
	struct rn_ibv_cq *send_cq;
	struct rn_ibv_cq *recv_cq;
	void *srq;
	struct rn_ibv_qp_cap cap;
	int qp_type;
	int sq_sig_all;
};

/* struct ibv_rx_hash_conf */
struct rn_ibv_rx_hash_conf {
	uint8_t rx_hash_function;
	uint8_t rx_hash_key_len;
	uint8_t *rx_hash_key;
	uint64_t rx_hash_fields_mask;
};

/* struct ibv_qp_init_attr_ex */
struct rn_ibv_qp_init_attr_ex {
	void *qp_context;
	struct rn_ibv_cq *send_cq;
	struct rn_ibv_cq *recv_cq;
	void *srq;
	struct rn_ibv_qp_cap cap;
	int qp_type;
	int sq_sig_all;
	uint32_t comp_mask;
	struct rn_ibv_pd *pd;
	void *xrcd;
	uint32_t create_flags;
	uint16_t max_tso_header;
	void *rwq_ind_tbl;
	struct rn_ibv_rx_hash_conf rx_hash_conf;
	uint32_t source_qpn;
	uint64_t send_ops_flags;
};

/* struct ibv_qp_attr */
struct rn_ibv_qp_attr {
	int qp_state;
	int cur_qp_state;
	int path_mtu;
	int path_mig_state;
	uint32_t qkey;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qp_num;
	unsigned int qp_access_flags;
	struct rn_ibv_qp_cap cap;
	struct rn_ibv_ah_attr ah_attr;
	struct rn_ibv_ah_attr alt_ah_attr;
	uint16_t pkey_index;
	uint16_t alt_pkey_index;
	uint8_t en_sqd_async_notify;
	uint8_t sq_draining;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t port_num;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t alt_port_num;
	uint8_t alt_timeout;
	uint32_t rate_limit;
};

/* struct ibv_sge */
struct rn_ibv_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

/* struct ibv_send_wr */
struct rn_ibv_send_wr {
	uint64_t wr_id;
	struct rn_ibv_send_wr *next;
	struct rn_ibv_sge *sg_list;
	int num_sge;
	int opcode;
	unsigned int send_flags;
	uint32_t imm_data; /* network byte order */
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
		} rdma;
		struct {
			uint64_t remote_addr;
			uint64_t compare_add;
			uint64_t swap;
			uint32_t rkey;
		} atomic;
		struct {
			struct rn_ibv_ah *ah;
			uint32_t remote_qpn;
			uint32_t remote_qkey;
		} ud;
	} wr;
	union {
		struct {
			uint32_t remote_srqn;
		} xrc;
	} qp_type;
	union {
		struct {
			void *mw;
			uint32_t rkey;
			struct {
				void *mr;
				uint64_t addr;
				uint64_t length;
				unsigned int mw_access_flags;
			} bind_info;
		} bind_mw;
		struct {
			void *hdr;
			uint16_t hdr_sz;
			uint16_t mss;
		} tso;
	} ext;
};

/* struct ibv_recv_wr */
struct rn_ibv_recv_wr {
	uint64_t wr_id;
	struct rn_ibv_recv_wr *next;
	struct rn_ibv_sge *sg_list;
	int num_sge;
};

/* struct ibv_wc */
struct rn_ibv_wc {
	uint64_t wr_id;
	int status;
	int opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm_data; /* network byte order */
	uint32_t qp_num;
	uint32_t src_qp;
	unsigned int wc_flags;
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
};

/* librdmacm */

/* struct rdma_event_channel */
struct rn_rdma_event_channel {
	int fd;
};

/* struct rdma_ib_addr */
struct rn_rdma_ib_addr {
	union rn_ibv_gid sgid;
	union rn_ibv_gid dgid;
	uint16_t pkey; /* big endian */
};

/* struct rdma_addr */
struct rn_rdma_addr {
	union {
		struct sockaddr src_addr;
		struct sockaddr_in src_sin;
		struct sockaddr_in6 src_sin6;
		struct sockaddr_storage src_storage;
	} src;
	union {
		struct sockaddr dst_addr;
		struct sockaddr_in dst_sin;
		struct sockaddr_in6 dst_sin6;
		struct sockaddr_storage dst_storage;
	} dst;
	union {
		struct rn_rdma_ib_addr ibaddr;
	} addr;
};

/* struct rdma_route */
struct rn_rdma_route {
	struct rn_rdma_addr addr;
	void *path_rec;
	int num_paths;
};

struct rn_rdma_cm_event;

/* struct rdma_cm_id */
struct rn_rdma_cm_id {
	struct rn_ibv_context *verbs;
	struct rn_rdma_event_channel *channel;
	void *context;
	struct rn_ibv_qp *qp;
	struct rn_rdma_route route;
	int ps;
	uint8_t port_num;
	struct rn_rdma_cm_event *event;
	struct rn_ibv_comp_channel *send_cq_channel;
	struct rn_ibv_cq *send_cq;
	struct rn_ibv_comp_channel *recv_cq_channel;
	struct rn_ibv_cq *recv_cq;
	void *srq;
	struct rn_ibv_pd *pd;
	int qp_type;
};

/* struct rdma_conn_param */
struct rn_rdma_conn_param {
	const void *private_data;
	uint8_t private_data_len;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t flow_control;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t srq;
	uint32_t qp_num;
};

/* struct rdma_ud_param */
struct rn_rdma_ud_param {
	const void *private_data;
	uint8_t private_data_len;
	struct rn_ibv_ah_attr ah_attr;
	uint32_t qp_num;
	uint32_t qkey;
};

/* struct rdma_cm_event */
struct rn_rdma_cm_event {
	struct rn_rdma_cm_id *id;
	struct rn_rdma_cm_id *listen_id;
	int event;
	int status;
	union {
		struct rn_rdma_conn_param conn;
		struct rn_rdma_ud_param ud;
	} param;
};

/* struct rdma_cm_join_mc_attr_ex */
struct rn_rdma_cm_join_mc_attr_ex {
	uint32_t comp_mask;
	uint32_t join_flags;
	struct sockaddr *addr;
};

/* struct sockaddr_ib (<infiniband/ib.h>) */
struct rn_sockaddr_ib {
	unsigned short int sib_family;
	uint16_t sib_pkey;
	uint32_t sib_flowinfo;
	uint8_t sib_addr[16];
	uint64_t sib_sid;
	uint64_t sib_sid_mask;
	uint64_t sib_scope_id;
};

/* struct ibv_async_event */
struct rn_ibv_async_event {
	union {
		struct rn_ibv_cq *cq;
		struct rn_ibv_qp *qp;
		void *srq;
		void *wq;
		int port_num;
	} element;
	int event_type;
};

/* Constants (values from verbs.h and rdma_cma.h, checked by abicheck.c). */
enum {
	RN_AF_IB = 27,

	RN_IBV_QPT_UD = 4,
	RN_IBV_QPS_RESET = 0,
	RN_IBV_QPS_INIT = 1,
	RN_IBV_QPS_RTR = 2,
	RN_IBV_QPS_RTS = 3,
	RN_IBV_QPS_ERR = 6,
	RN_IBV_QP_STATE = 1 << 0,
	RN_IBV_QP_PKEY_INDEX = 1 << 4,
	RN_IBV_QP_PORT = 1 << 5,
	RN_IBV_QP_QKEY = 1 << 6,
	RN_IBV_QP_SQ_PSN = 1 << 16,

	RN_IBV_EVENT_CQ_ERR = 0,
	RN_IBV_EVENT_QP_FATAL = 1,
	RN_IBV_EVENT_QP_REQ_ERR = 2,
	RN_IBV_EVENT_QP_ACCESS_ERR = 3,
	RN_IBV_EVENT_PORT_ACTIVE = 9,
	RN_IBV_EVENT_PORT_ERR = 10,
	RN_IBV_EVENT_GID_CHANGE = 18,
	RN_IBV_EVENT_DEVICE_FATAL = 8,

	RN_IBV_QP_INIT_ATTR_PD = 1 << 0,
	RN_IBV_QP_INIT_ATTR_CREATE_FLAGS = 1 << 2,
	RN_IBV_QP_CREATE_BLOCK_SELF_MCAST_LB = 1 << 1,

	RN_IBV_ACCESS_LOCAL_WRITE = 1,

	RN_IBV_WR_SEND = 2,
	RN_IBV_WR_SEND_WITH_IMM = 3,
	RN_IBV_SEND_SIGNALED = 1 << 1,
	RN_IBV_SEND_SOLICITED = 1 << 2,
	RN_IBV_SEND_INLINE = 1 << 3,

	RN_IBV_WC_SEND = 0,
	RN_IBV_WC_RECV = 1 << 7,
	RN_IBV_WC_GRH = 1 << 0,
	RN_IBV_WC_WITH_IMM = 1 << 1,

	RN_IBV_LINK_LAYER_UNSPECIFIED = 0,
	RN_IBV_LINK_LAYER_INFINIBAND = 1,
	RN_IBV_LINK_LAYER_ETHERNET = 2,

	RN_RDMA_PS_UDP = 0x0111,
	RN_RDMA_UDP_QKEY = 0x01234567,

	RN_RDMA_CM_EVENT_ADDR_ERROR = 1,
	RN_RDMA_CM_EVENT_UNREACHABLE = 7,
	RN_RDMA_CM_EVENT_DEVICE_REMOVAL = 11,
	RN_RDMA_CM_EVENT_MULTICAST_JOIN = 12,
	RN_RDMA_CM_EVENT_MULTICAST_ERROR = 13,
	RN_RDMA_CM_EVENT_ADDR_CHANGE = 14,

	RN_RDMA_CM_JOIN_MC_ATTR_ADDRESS = 1 << 0,
	RN_RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS = 1 << 1,
	RN_RDMA_MC_JOIN_FLAG_FULLMEMBER = 0,
	RN_RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER = 1,
};

#endif
