//go:build linux

package rdmanet

import "github.com/go-rdma/rdmanet/internal/verbs"

// BackendNoSockets is a test backend: the software provider, except that
// its QP says it has no sockets (SocketBuffer 0, SetSocketBuffer
// ErrNotSupported), as rdma-core's: the conn's buffers are then its
// rings, as on rdma-core.
const BackendNoSockets = "test-no-sockets"

func init() {
	verbs.Register(testProvider{name: BackendNoSockets, base: verbs.Software,
		wrap: func(id verbs.ID) verbs.ID { return noSocketsID{id} }})
}

type noSocketsID struct{ verbs.ID }

func (n noSocketsID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	qp, err := n.ID.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	return noSocketsQP{qp}, nil
}

type noSocketsQP struct{ verbs.QP }

func (noSocketsQP) SocketBuffer(bool) int { return 0 }
func (noSocketsQP) SetSocketBuffer(bool, int) (int, error) {
	return 0, verbs.ErrNotSupported
}
