package verbs

import "errors"

// ErrPortDown: the port is not ACTIVE (its link is down): a QP cannot be
// brought back to work yet.
var ErrPortDown = errors.New("verbs: port not active")

// QPResetter is implemented by QPs that can be brought back from the error
// state in place: a UD QP that was sending when its port went down ends in
// ERR (rxe does this on a link flap), where every later send completes
// with an error and nothing leaves. Reset keeps the QP number, the Q_Key
// and the multicast attachments, so peers and groups need not learn
// anything new; what was posted is gone: the caller reposts its receives
// and forgets its outstanding sends.
type QPResetter interface {
	// Ready reports whether the QP is in RTS (ibv_query_qp).
	Ready() (bool, error)
	// Reset takes the QP through RESET, INIT and RTR back to RTS
	// (ibv_modify_qp), with the P_Key index, port and Q_Key it had. It
	// fails with ErrPortDown, doing nothing, while the port is not
	// ACTIVE: a QP reset then would only fail again (and rxe's may not
	// send even once the link is back).
	Reset() error
}

// DeviceCounter is implemented by QPs whose device keeps counters that
// say more about loss than the QP itself can: rxe's port hw_counters
// (rcvd_pkts against rdma_recvs). The counts are the device's, since
// the QP was created, shared by every QP on the port: not this QP's.
type DeviceCounter interface {
	DeviceCounts() map[string]uint64
}
