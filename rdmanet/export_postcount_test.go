//go:build linux

package rdmanet

import (
	"sync"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// BackendCountingPosts is a test backend: the software provider, whose
// QP records how many work requests each send post carried (PostSend
// and PollPostSend alike), read by SendPosts.
const BackendCountingPosts = "test-counting-posts"

func init() {
	verbs.Register(testProvider{name: BackendCountingPosts, base: verbs.Software,
		wrap: func(id verbs.ID) verbs.ID { return postCountingID{id} }})
}

type postCountingID struct{ verbs.ID }

func (p postCountingID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	qp, err := p.ID.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	return &postCountingQP{QP: qp}, nil
}

type postCountingQP struct {
	verbs.QP
	mu    sync.Mutex
	posts []int
}

func (q *postCountingQP) record(n int) {
	q.mu.Lock()
	q.posts = append(q.posts, n)
	q.mu.Unlock()
}

func (q *postCountingQP) PostSend(wrs []verbs.SendWR) (int, error) {
	q.record(len(wrs))
	return q.QP.PostSend(wrs)
}

func (q *postCountingQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	if len(wrs) > 0 {
		q.record(len(wrs))
	}
	return q.QP.PollPostSend(wcs, wrs)
}

// SendPosts returns the work requests of each send post of c, a
// BackendCountingPosts conn, since the last call.
func SendPosts(c *Conn) []int {
	q := c.qp.(*postCountingQP)
	q.mu.Lock()
	defer q.mu.Unlock()
	p := q.posts
	q.posts = nil
	return p
}
