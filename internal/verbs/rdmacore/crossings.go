package rdmacore

import "sync/atomic"

// crossings counts the data-path cgo crossings of the process: posting
// receives and sends, polling, arming CQs, reading and acking CQ events.
// Each moves a whole batch, so crossings per message is the measure of
// how well batching works.
var crossings atomic.Uint64

// Crossings returns the number of data-path cgo crossings so far.
func Crossings() uint64 { return crossings.Load() }
