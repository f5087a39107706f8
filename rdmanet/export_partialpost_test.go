//go:build linux

package rdmanet

import (
	"os"
	"syscall"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// BackendPartialPosts is a test backend: the software provider, whose
// send post of more than one work request posts only the first and
// fails the rest with ENOBUFS, as a kernel that took part of a batch.
const BackendPartialPosts = "test-partial-posts"

func init() {
	verbs.Register(testProvider{name: BackendPartialPosts, base: verbs.Software,
		wrap: wrapQPs(func(qp verbs.QP) verbs.QP { return partialPostQP{qp} })})
}

type partialPostQP struct{ verbs.QP }

func (q partialPostQP) PostSend(wrs []verbs.SendWR) (int, error) {
	if len(wrs) <= 1 {
		return q.QP.PostSend(wrs)
	}
	n, err := q.QP.PostSend(wrs[:1])
	if err != nil {
		return n, err
	}
	return n, os.NewSyscallError("sendto", syscall.ENOBUFS)
}

func (q partialPostQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs) // through the partial PostSend
}
