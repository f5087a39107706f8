//go:build linux

package rdmanet

import "github.com/go-rdma/rdmanet/internal/verbs"

// BackendUnknownUnread is a test backend: the software provider, whose
// receive CQ cannot tell without polling whether completions wait
// (Unread: not known), as rdma-core's.
const BackendUnknownUnread = "test-unknown-unread"

func init() {
	verbs.Register(testProvider{name: BackendUnknownUnread, base: verbs.Software,
		wrap: wrapQPs(func(qp verbs.QP) verbs.QP { return unknownUnreadQP{qp} })})
}

type unknownUnreadQP struct{ verbs.QP }

func (q unknownUnreadQP) RecvCQ() verbs.CQ { return unknownUnreadCQ{q.QP.RecvCQ()} }

type unknownUnreadCQ struct{ verbs.CQ }

func (unknownUnreadCQ) Unread() (bool, bool) { return false, false }

// Unread is what rdmanet/reliable asks of c: whether received datagrams
// wait to be read, and whether that is known.
func Unread(c *Conn) (pending, known bool) { return c.unread() }
