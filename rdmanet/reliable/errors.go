package reliable

import (
	"errors"
	"fmt"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// LossError reports messages of one sender that this receiver will never
// get: they left the sender's retransmit window (or the sender's memory)
// before they were repaired. ReadFrom returns it once, wrapped in a
// *net.OpError (use errors.As), at the place in that sender's stream where
// the messages were; the next ReadFrom goes on with the messages after
// them.
type LossError struct {
	From     rdmanet.Addr // the sender's QP
	Session  uint32       // the sender's session
	Messages uint64       // how many messages were lost
}

func (e *LossError) Error() string {
	return fmt.Sprintf("reliable: lost %d messages from %v (session %#08x): they left the sender's window", e.Messages, &e.From, e.Session)
}

// ErrWriteAddr is returned (in a *net.OpError) by a write to anything
// other than the conn's group.
var ErrWriteAddr = errors.New("reliable: writes go to the conn's group only")

// messageTooLongError is a write longer than Config.MaxMessage: it is
// rdmanet.ErrMessageTooLong (errors.Is), with the limit that applies.
type messageTooLongError struct{ n, max int }

func (e *messageTooLongError) Error() string {
	return fmt.Sprintf("reliable: %d-byte message longer than Config.MaxMessage %d", e.n, e.max)
}
func (e *messageTooLongError) Unwrap() error { return rdmanet.ErrMessageTooLong }
