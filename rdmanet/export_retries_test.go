//go:build linux

package rdmanet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// BackendFailingRetries is a test backend: the software provider, whose
// group joins and QP resets fail as many times as FailJoins and
// FailResets say, so that the conn's retries run.
const BackendFailingRetries = "test-failing-retries"

// RecoverRetry is how long a failed QP reset waits before the next try.
const RecoverRetry = recoverRetry

var errInjected = errors.New("injected failure")

func init() {
	verbs.Register(testProvider{name: BackendFailingRetries, base: verbs.Software,
		wrap: func(id verbs.ID) verbs.ID { return &retryID{ID: id} }})
}

type retryID struct {
	verbs.ID
	failJoins, failResets atomic.Int32
}

// take reports whether one more of n's failures is due, using it up.
func take(n *atomic.Int32) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

func (id *retryID) Join(ctx context.Context, g verbs.Group, opt verbs.JoinOptions) (verbs.Membership, error) {
	if take(&id.failJoins) {
		return verbs.Membership{}, errInjected
	}
	return id.ID.Join(ctx, g, opt)
}

func (id *retryID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	qp, err := id.ID.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	return retryQP{qp, id}, nil
}

type retryQP struct {
	verbs.QP
	id *retryID
}

func (q retryQP) Reset() error {
	if take(&q.id.failResets) {
		return errInjected
	}
	return q.QP.Reset()
}

// FailJoins makes the next n group joins of c (on BackendFailingRetries)
// fail.
func FailJoins(c *Conn, n int32) { c.id.(*retryID).failJoins.Store(n) }

// FailResets makes the next n QP resets of c (on BackendFailingRetries)
// fail.
func FailResets(c *Conn, n int32) { c.id.(*retryID).failResets.Store(n) }

// InjectRetryEvent is InjectEvent for a conn on BackendFailingRetries.
func InjectRetryEvent(c *Conn, ev verbs.Event) error {
	return soft.InjectEvent(c.id.(*retryID).ID, ev)
}

// waitLog records the waits asked of a time.After stand-in.
type waitLog struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (l *waitLog) add(d time.Duration) {
	l.mu.Lock()
	l.waits = append(l.waits, d)
	l.mu.Unlock()
}

func (l *waitLog) get() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.waits...)
}

// ObserveRejoinWaits makes every conn's rejoin back-off end at once and
// records it; waits returns them so far, and restore puts time.After
// back. Not for parallel tests.
func ObserveRejoinWaits() (waits func() []time.Duration, restore func()) {
	var l waitLog
	rejoinAfter = func(d time.Duration) <-chan time.Time {
		l.add(d)
		return time.After(0)
	}
	return l.get, func() { rejoinAfter = time.After }
}

// ObserveRecoverWaits records every conn's recoverLoop wait, cut to
// RecoverRetry at most; waits returns them so far, and restore puts
// time.After back. Not for parallel tests.
func ObserveRecoverWaits() (waits func() []time.Duration, restore func()) {
	var l waitLog
	recoverAfter = func(d time.Duration) <-chan time.Time {
		l.add(d)
		return time.After(min(d, recoverRetry))
	}
	return l.get, func() { recoverAfter = time.After }
}
