/*
 * abicheck.c: proves that rdma_abi.h matches rdma-core's real headers.
 * Built and run by TestABIMatchesRDMACoreHeaders when <infiniband/verbs.h>
 * and <rdma/rdma_cma.h> are installed (apt-get install libibverbs-dev
 * librdmacm-dev). Prints one line per check and exits 1 on any mismatch.
 */
#include <stdio.h>
#include <infiniband/verbs.h>
#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>
#include "../rdma_abi.h"

static int checks, bad;

static void check(const char *what, size_t mine, size_t real)
{
	checks++;
	if (mine != real) {
		bad++;
		printf("MISMATCH %s: rdma_abi.h %zu, rdma-core %zu\n", what, mine, real);
	} else {
		printf("ok %s = %zu\n", what, real);
	}
}

#define MSZ(t, f) sizeof(((t *)0)->f)
#define SIZE(rn, real) check("sizeof(" #real ")", sizeof(rn), sizeof(real))
/* member f of rn at the same offset and with the same size as g of real */
#define FIELD2(rn, f, real, g)                                                \
	do {                                                                   \
		check("offsetof(" #real ", " #g ")", offsetof(rn, f),          \
		      offsetof(real, g));                                      \
		check("sizeof(" #real "." #g ")", MSZ(rn, f), MSZ(real, g));   \
	} while (0)
#define FIELD(rn, real, f) FIELD2(rn, f, real, f)
#define CONST(rn, real) check(#real, (size_t)(rn), (size_t)(real))

int main(void)
{
	SIZE(union rn_ibv_gid, union ibv_gid);

	SIZE(struct rn_ibv_context_ops, struct ibv_context_ops);
	FIELD(struct rn_ibv_context_ops, struct ibv_context_ops, poll_cq);
	FIELD(struct rn_ibv_context_ops, struct ibv_context_ops, req_notify_cq);
	FIELD(struct rn_ibv_context_ops, struct ibv_context_ops, post_send);
	FIELD(struct rn_ibv_context_ops, struct ibv_context_ops, post_recv);

	SIZE(struct rn_ibv_context, struct ibv_context);
	FIELD(struct rn_ibv_context, struct ibv_context, device);
	FIELD(struct rn_ibv_context, struct ibv_context, ops);
	FIELD(struct rn_ibv_context, struct ibv_context, cmd_fd);
	FIELD(struct rn_ibv_context, struct ibv_context, async_fd);
	FIELD(struct rn_ibv_context, struct ibv_context, num_comp_vectors);
	FIELD(struct rn_ibv_context, struct ibv_context, mutex);
	FIELD(struct rn_ibv_context, struct ibv_context, abi_compat);

	SIZE(struct rn_ibv_device_attr, struct ibv_device_attr);
	FIELD(struct rn_ibv_device_attr, struct ibv_device_attr, node_guid);
	FIELD(struct rn_ibv_device_attr, struct ibv_device_attr, max_qp_wr);
	FIELD(struct rn_ibv_device_attr, struct ibv_device_attr, atomic_cap);
	FIELD(struct rn_ibv_device_attr, struct ibv_device_attr, max_mcast_grp);
	FIELD(struct rn_ibv_device_attr, struct ibv_device_attr, max_mcast_qp_attach);
	FIELD(struct rn_ibv_device_attr, struct ibv_device_attr, max_total_mcast_qp_attach);
	FIELD(struct rn_ibv_device_attr, struct ibv_device_attr, max_pkeys);
	FIELD(struct rn_ibv_device_attr, struct ibv_device_attr, phys_port_cnt);

	SIZE(struct rn_ibv_port_attr, struct ibv_port_attr);
	FIELD(struct rn_ibv_port_attr, struct ibv_port_attr, state);
	FIELD(struct rn_ibv_port_attr, struct ibv_port_attr, max_mtu);
	FIELD(struct rn_ibv_port_attr, struct ibv_port_attr, active_mtu);
	FIELD(struct rn_ibv_port_attr, struct ibv_port_attr, gid_tbl_len);
	FIELD(struct rn_ibv_port_attr, struct ibv_port_attr, lid);
	FIELD(struct rn_ibv_port_attr, struct ibv_port_attr, phys_state);
	FIELD(struct rn_ibv_port_attr, struct ibv_port_attr, link_layer);
	FIELD(struct rn_ibv_port_attr, struct ibv_port_attr, flags);
	FIELD(struct rn_ibv_port_attr, struct ibv_port_attr, port_cap_flags2);

	SIZE(struct rn_ibv_comp_channel, struct ibv_comp_channel);
	FIELD(struct rn_ibv_comp_channel, struct ibv_comp_channel, context);
	FIELD(struct rn_ibv_comp_channel, struct ibv_comp_channel, fd);
	FIELD(struct rn_ibv_comp_channel, struct ibv_comp_channel, refcnt);

	SIZE(struct rn_ibv_pd, struct ibv_pd);
	FIELD(struct rn_ibv_pd, struct ibv_pd, context);

	SIZE(struct rn_ibv_mr, struct ibv_mr);
	FIELD(struct rn_ibv_mr, struct ibv_mr, addr);
	FIELD(struct rn_ibv_mr, struct ibv_mr, length);
	FIELD(struct rn_ibv_mr, struct ibv_mr, lkey);
	FIELD(struct rn_ibv_mr, struct ibv_mr, rkey);

	SIZE(struct rn_ibv_ah, struct ibv_ah);
	FIELD(struct rn_ibv_ah, struct ibv_ah, handle);

	SIZE(struct rn_ibv_cq, struct ibv_cq);
	FIELD(struct rn_ibv_cq, struct ibv_cq, context);
	FIELD(struct rn_ibv_cq, struct ibv_cq, channel);
	FIELD(struct rn_ibv_cq, struct ibv_cq, cqe);
	FIELD(struct rn_ibv_cq, struct ibv_cq, mutex);
	FIELD(struct rn_ibv_cq, struct ibv_cq, cond);
	FIELD(struct rn_ibv_cq, struct ibv_cq, comp_events_completed);
	FIELD(struct rn_ibv_cq, struct ibv_cq, async_events_completed);

	SIZE(struct rn_ibv_qp, struct ibv_qp);
	FIELD(struct rn_ibv_qp, struct ibv_qp, context);
	FIELD(struct rn_ibv_qp, struct ibv_qp, pd);
	FIELD(struct rn_ibv_qp, struct ibv_qp, qp_num);
	FIELD(struct rn_ibv_qp, struct ibv_qp, state);
	FIELD(struct rn_ibv_qp, struct ibv_qp, qp_type);
	FIELD(struct rn_ibv_qp, struct ibv_qp, events_completed);

	SIZE(struct rn_ibv_global_route, struct ibv_global_route);
	FIELD(struct rn_ibv_global_route, struct ibv_global_route, dgid);
	FIELD(struct rn_ibv_global_route, struct ibv_global_route, flow_label);
	FIELD(struct rn_ibv_global_route, struct ibv_global_route, sgid_index);
	FIELD(struct rn_ibv_global_route, struct ibv_global_route, hop_limit);
	FIELD(struct rn_ibv_global_route, struct ibv_global_route, traffic_class);

	SIZE(struct rn_ibv_ah_attr, struct ibv_ah_attr);
	FIELD(struct rn_ibv_ah_attr, struct ibv_ah_attr, grh);
	FIELD(struct rn_ibv_ah_attr, struct ibv_ah_attr, dlid);
	FIELD(struct rn_ibv_ah_attr, struct ibv_ah_attr, sl);
	FIELD(struct rn_ibv_ah_attr, struct ibv_ah_attr, src_path_bits);
	FIELD(struct rn_ibv_ah_attr, struct ibv_ah_attr, static_rate);
	FIELD(struct rn_ibv_ah_attr, struct ibv_ah_attr, is_global);
	FIELD(struct rn_ibv_ah_attr, struct ibv_ah_attr, port_num);

	SIZE(struct rn_ibv_qp_cap, struct ibv_qp_cap);
	FIELD(struct rn_ibv_qp_cap, struct ibv_qp_cap, max_inline_data);

	SIZE(struct rn_ibv_qp_init_attr, struct ibv_qp_init_attr);
	FIELD(struct rn_ibv_qp_init_attr, struct ibv_qp_init_attr, cap);
	FIELD(struct rn_ibv_qp_init_attr, struct ibv_qp_init_attr, qp_type);
	FIELD(struct rn_ibv_qp_init_attr, struct ibv_qp_init_attr, sq_sig_all);

	SIZE(struct rn_ibv_rx_hash_conf, struct ibv_rx_hash_conf);
	SIZE(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex);
	FIELD(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex, send_cq);
	FIELD(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex, recv_cq);
	FIELD(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex, cap);
	FIELD(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex, qp_type);
	FIELD(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex, sq_sig_all);
	FIELD(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex, comp_mask);
	FIELD(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex, pd);
	FIELD(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex, xrcd);
	FIELD(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex, create_flags);
	FIELD(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex, max_tso_header);
	FIELD(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex, rwq_ind_tbl);
	FIELD(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex, rx_hash_conf);
	FIELD(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex, source_qpn);
	FIELD(struct rn_ibv_qp_init_attr_ex, struct ibv_qp_init_attr_ex, send_ops_flags);

	SIZE(struct rn_ibv_qp_attr, struct ibv_qp_attr);
	FIELD(struct rn_ibv_qp_attr, struct ibv_qp_attr, qp_state);
	FIELD(struct rn_ibv_qp_attr, struct ibv_qp_attr, qkey);
	FIELD(struct rn_ibv_qp_attr, struct ibv_qp_attr, cap);
	FIELD(struct rn_ibv_qp_attr, struct ibv_qp_attr, ah_attr);
	FIELD(struct rn_ibv_qp_attr, struct ibv_qp_attr, pkey_index);
	FIELD(struct rn_ibv_qp_attr, struct ibv_qp_attr, port_num);
	FIELD(struct rn_ibv_qp_attr, struct ibv_qp_attr, rate_limit);

	SIZE(struct rn_ibv_sge, struct ibv_sge);
	FIELD(struct rn_ibv_sge, struct ibv_sge, addr);
	FIELD(struct rn_ibv_sge, struct ibv_sge, length);
	FIELD(struct rn_ibv_sge, struct ibv_sge, lkey);

	SIZE(struct rn_ibv_send_wr, struct ibv_send_wr);
	FIELD(struct rn_ibv_send_wr, struct ibv_send_wr, wr_id);
	FIELD(struct rn_ibv_send_wr, struct ibv_send_wr, next);
	FIELD(struct rn_ibv_send_wr, struct ibv_send_wr, sg_list);
	FIELD(struct rn_ibv_send_wr, struct ibv_send_wr, num_sge);
	FIELD(struct rn_ibv_send_wr, struct ibv_send_wr, opcode);
	FIELD(struct rn_ibv_send_wr, struct ibv_send_wr, send_flags);
	FIELD(struct rn_ibv_send_wr, struct ibv_send_wr, imm_data);
	FIELD(struct rn_ibv_send_wr, struct ibv_send_wr, wr);
	FIELD(struct rn_ibv_send_wr, struct ibv_send_wr, wr.ud.ah);
	FIELD(struct rn_ibv_send_wr, struct ibv_send_wr, wr.ud.remote_qpn);
	FIELD(struct rn_ibv_send_wr, struct ibv_send_wr, wr.ud.remote_qkey);
	FIELD(struct rn_ibv_send_wr, struct ibv_send_wr, qp_type);
	FIELD2(struct rn_ibv_send_wr, ext.bind_mw, struct ibv_send_wr, bind_mw);
	FIELD2(struct rn_ibv_send_wr, ext.tso, struct ibv_send_wr, tso);

	SIZE(struct rn_ibv_recv_wr, struct ibv_recv_wr);
	FIELD(struct rn_ibv_recv_wr, struct ibv_recv_wr, wr_id);
	FIELD(struct rn_ibv_recv_wr, struct ibv_recv_wr, next);
	FIELD(struct rn_ibv_recv_wr, struct ibv_recv_wr, sg_list);
	FIELD(struct rn_ibv_recv_wr, struct ibv_recv_wr, num_sge);

	SIZE(struct rn_ibv_wc, struct ibv_wc);
	FIELD(struct rn_ibv_wc, struct ibv_wc, wr_id);
	FIELD(struct rn_ibv_wc, struct ibv_wc, status);
	FIELD(struct rn_ibv_wc, struct ibv_wc, opcode);
	FIELD(struct rn_ibv_wc, struct ibv_wc, vendor_err);
	FIELD(struct rn_ibv_wc, struct ibv_wc, byte_len);
	FIELD(struct rn_ibv_wc, struct ibv_wc, imm_data);
	FIELD(struct rn_ibv_wc, struct ibv_wc, qp_num);
	FIELD(struct rn_ibv_wc, struct ibv_wc, src_qp);
	FIELD(struct rn_ibv_wc, struct ibv_wc, wc_flags);
	FIELD(struct rn_ibv_wc, struct ibv_wc, pkey_index);
	FIELD(struct rn_ibv_wc, struct ibv_wc, slid);
	FIELD(struct rn_ibv_wc, struct ibv_wc, sl);
	FIELD(struct rn_ibv_wc, struct ibv_wc, dlid_path_bits);

	SIZE(struct rn_rdma_event_channel, struct rdma_event_channel);
	FIELD(struct rn_rdma_event_channel, struct rdma_event_channel, fd);

	SIZE(struct rn_rdma_ib_addr, struct rdma_ib_addr);
	FIELD(struct rn_rdma_ib_addr, struct rdma_ib_addr, sgid);
	FIELD(struct rn_rdma_ib_addr, struct rdma_ib_addr, dgid);
	FIELD(struct rn_rdma_ib_addr, struct rdma_ib_addr, pkey);
	SIZE(struct rn_rdma_addr, struct rdma_addr);
	FIELD2(struct rn_rdma_addr, src.src_storage, struct rdma_addr, src_storage);
	FIELD2(struct rn_rdma_addr, dst.dst_storage, struct rdma_addr, dst_storage);
	FIELD(struct rn_rdma_addr, struct rdma_addr, addr.ibaddr);
	SIZE(struct rn_rdma_route, struct rdma_route);
	FIELD(struct rn_rdma_route, struct rdma_route, path_rec);
	FIELD(struct rn_rdma_route, struct rdma_route, num_paths);

	SIZE(struct rn_rdma_cm_id, struct rdma_cm_id);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, verbs);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, channel);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, context);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, qp);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, route);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, ps);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, port_num);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, event);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, send_cq_channel);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, send_cq);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, recv_cq_channel);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, recv_cq);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, srq);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, pd);
	FIELD(struct rn_rdma_cm_id, struct rdma_cm_id, qp_type);

	SIZE(struct rn_rdma_conn_param, struct rdma_conn_param);
	SIZE(struct rn_rdma_ud_param, struct rdma_ud_param);
	FIELD(struct rn_rdma_ud_param, struct rdma_ud_param, private_data);
	FIELD(struct rn_rdma_ud_param, struct rdma_ud_param, private_data_len);
	FIELD(struct rn_rdma_ud_param, struct rdma_ud_param, ah_attr);
	FIELD(struct rn_rdma_ud_param, struct rdma_ud_param, qp_num);
	FIELD(struct rn_rdma_ud_param, struct rdma_ud_param, qkey);

	SIZE(struct rn_rdma_cm_event, struct rdma_cm_event);
	FIELD(struct rn_rdma_cm_event, struct rdma_cm_event, id);
	FIELD(struct rn_rdma_cm_event, struct rdma_cm_event, event);
	FIELD(struct rn_rdma_cm_event, struct rdma_cm_event, status);
	FIELD(struct rn_rdma_cm_event, struct rdma_cm_event, param);
	FIELD(struct rn_rdma_cm_event, struct rdma_cm_event, param.ud);

	SIZE(struct rn_rdma_cm_join_mc_attr_ex, struct rdma_cm_join_mc_attr_ex);
	FIELD(struct rn_rdma_cm_join_mc_attr_ex, struct rdma_cm_join_mc_attr_ex, comp_mask);
	FIELD(struct rn_rdma_cm_join_mc_attr_ex, struct rdma_cm_join_mc_attr_ex, join_flags);
	FIELD(struct rn_rdma_cm_join_mc_attr_ex, struct rdma_cm_join_mc_attr_ex, addr);

	SIZE(struct rn_ibv_async_event, struct ibv_async_event);
	FIELD(struct rn_ibv_async_event, struct ibv_async_event, element);
	FIELD(struct rn_ibv_async_event, struct ibv_async_event, event_type);

	SIZE(struct rn_sockaddr_ib, struct sockaddr_ib);
	FIELD(struct rn_sockaddr_ib, struct sockaddr_ib, sib_family);
	FIELD(struct rn_sockaddr_ib, struct sockaddr_ib, sib_pkey);
	FIELD(struct rn_sockaddr_ib, struct sockaddr_ib, sib_addr);
	FIELD(struct rn_sockaddr_ib, struct sockaddr_ib, sib_scope_id);

	CONST(RN_AF_IB, AF_IB);
	CONST(RN_IBV_QPT_UD, IBV_QPT_UD);
	CONST(RN_IBV_QPS_RESET, IBV_QPS_RESET);
	CONST(RN_IBV_QPS_INIT, IBV_QPS_INIT);
	CONST(RN_IBV_QPS_RTR, IBV_QPS_RTR);
	CONST(RN_IBV_QPS_RTS, IBV_QPS_RTS);
	CONST(RN_IBV_QPS_ERR, IBV_QPS_ERR);
	CONST(RN_IBV_QP_PKEY_INDEX, IBV_QP_PKEY_INDEX);
	CONST(RN_IBV_QP_PORT, IBV_QP_PORT);
	CONST(RN_IBV_QP_SQ_PSN, IBV_QP_SQ_PSN);
	CONST(RN_IBV_EVENT_CQ_ERR, IBV_EVENT_CQ_ERR);
	CONST(RN_IBV_EVENT_QP_FATAL, IBV_EVENT_QP_FATAL);
	CONST(RN_IBV_EVENT_QP_REQ_ERR, IBV_EVENT_QP_REQ_ERR);
	CONST(RN_IBV_EVENT_QP_ACCESS_ERR, IBV_EVENT_QP_ACCESS_ERR);
	CONST(RN_IBV_EVENT_PORT_ACTIVE, IBV_EVENT_PORT_ACTIVE);
	CONST(RN_IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ERR);
	CONST(RN_IBV_EVENT_GID_CHANGE, IBV_EVENT_GID_CHANGE);
	CONST(RN_IBV_EVENT_DEVICE_FATAL, IBV_EVENT_DEVICE_FATAL);
	CONST(RN_IBV_QP_STATE, IBV_QP_STATE);
	CONST(RN_IBV_QP_QKEY, IBV_QP_QKEY);
	CONST(RN_IBV_QP_INIT_ATTR_PD, IBV_QP_INIT_ATTR_PD);
	CONST(RN_IBV_QP_INIT_ATTR_CREATE_FLAGS, IBV_QP_INIT_ATTR_CREATE_FLAGS);
	CONST(RN_IBV_QP_CREATE_BLOCK_SELF_MCAST_LB, IBV_QP_CREATE_BLOCK_SELF_MCAST_LB);
	CONST(RN_IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_LOCAL_WRITE);
	CONST(RN_IBV_WR_SEND, IBV_WR_SEND);
	CONST(RN_IBV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_IMM);
	CONST(RN_IBV_SEND_SIGNALED, IBV_SEND_SIGNALED);
	CONST(RN_IBV_SEND_SOLICITED, IBV_SEND_SOLICITED);
	CONST(RN_IBV_SEND_INLINE, IBV_SEND_INLINE);
	CONST(RN_IBV_WC_SEND, IBV_WC_SEND);
	CONST(RN_IBV_WC_RECV, IBV_WC_RECV);
	CONST(RN_IBV_WC_GRH, IBV_WC_GRH);
	CONST(RN_IBV_WC_WITH_IMM, IBV_WC_WITH_IMM);
	CONST(RN_IBV_LINK_LAYER_UNSPECIFIED, IBV_LINK_LAYER_UNSPECIFIED);
	CONST(RN_IBV_LINK_LAYER_INFINIBAND, IBV_LINK_LAYER_INFINIBAND);
	CONST(RN_IBV_LINK_LAYER_ETHERNET, IBV_LINK_LAYER_ETHERNET);
	CONST(RN_RDMA_PS_UDP, RDMA_PS_UDP);
	CONST(RN_RDMA_UDP_QKEY, RDMA_UDP_QKEY);
	CONST(RN_RDMA_CM_EVENT_ADDR_ERROR, RDMA_CM_EVENT_ADDR_ERROR);
	CONST(RN_RDMA_CM_EVENT_UNREACHABLE, RDMA_CM_EVENT_UNREACHABLE);
	CONST(RN_RDMA_CM_EVENT_DEVICE_REMOVAL, RDMA_CM_EVENT_DEVICE_REMOVAL);
	CONST(RN_RDMA_CM_EVENT_MULTICAST_JOIN, RDMA_CM_EVENT_MULTICAST_JOIN);
	CONST(RN_RDMA_CM_EVENT_MULTICAST_ERROR, RDMA_CM_EVENT_MULTICAST_ERROR);
	CONST(RN_RDMA_CM_EVENT_ADDR_CHANGE, RDMA_CM_EVENT_ADDR_CHANGE);
	CONST(RN_RDMA_CM_JOIN_MC_ATTR_ADDRESS, RDMA_CM_JOIN_MC_ATTR_ADDRESS);
	CONST(RN_RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS);
	CONST(RN_RDMA_MC_JOIN_FLAG_FULLMEMBER, RDMA_MC_JOIN_FLAG_FULLMEMBER);
	CONST(RN_RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER);

	printf("%d checks, %d mismatches\n", checks, bad);
	return bad ? 1 : 0;
}
