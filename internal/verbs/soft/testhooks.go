//go:build linux

package soft

import (
	"fmt"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// InjectEvent raises ev on the event channel of id, which must come from
// this provider, so that callers can test how they handle what the
// software provider never raises on its own (EventMulticastError,
// EventDeviceRemoval, EventQPError).
//
// An EventMulticastError only raises the event: the membership stays as it
// was until the caller leaves and rejoins. An EventDeviceRemoval also marks
// the ID removed, as a real removal would: from then on PostSend,
// PostRecv, Join and the receive CQ's Poll fail with verbs.ErrDeviceRemoved
// until the ID is closed. An EventQPError also puts the ID's QP in the
// error state, as a device's QP_FATAL does (reset.go): its sends are
// flushed and Ready reports false until QP.Reset.
func InjectEvent(id verbs.ID, ev verbs.Event) error {
	sid, ok := id.(*ID)
	if !ok {
		return fmt.Errorf("soft: InjectEvent: %T is not a software ID", id)
	}
	switch ev.Type {
	case verbs.EventDeviceRemoval:
		sid.removed.Store(true)
	case verbs.EventQPError:
		sid.mu.Lock()
		if sid.qp != nil {
			sid.qp.enterError()
		}
		sid.mu.Unlock()
	}
	if err := sid.ev.push(ev); err != nil {
		return fmt.Errorf("soft: InjectEvent: %w", err)
	}
	return nil
}
