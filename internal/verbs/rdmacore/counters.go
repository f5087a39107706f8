//go:build linux

package rdmacore

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Loss on rdma-core: a UD message that finds no posted receive is dropped
// by the device, and the verbs say nothing about it to the QP. What the
// device tells is per port, in sysfs (hw_counters), shared by every QP on
// the port:
//
//   - mlx5: out_of_buffer, the messages dropped for want of a receive
//     WQE on any QP of the port.
//   - rxe: no such counter (a UD message without a receive WQE is
//     dropped uncounted), but rcvd_pkts counts every packet the port
//     accepted and rdma_recvs every receive completion: the difference is
//     what found no receive (or was cut short), provided each packet had
//     one destination QP. A multicast packet delivered to n QPs of the
//     port adds 1 to rcvd_pkts and n to rdma_recvs, which hides as much
//     loss; the estimate is then a lower bound.
//
// Per-QP counters exist on mlx5 (`rdma statistic qp`, a counter set bound
// to the QP over RDMA netlink); rdmacore does not bind one.

// hwCountersDir is a port's hw_counters directory.
func hwCountersDir(dev string, port int) string {
	return filepath.Join(sysfsRoot, "sys/class/infiniband", dev, "ports", strconv.Itoa(port), "hw_counters")
}

// readHWCounters reads every counter of a port (nil when the port has
// none, or sysfs is not there).
func readHWCounters(dev string, port int) map[string]uint64 {
	dir := hwCountersDir(dev, port)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	m := make(map[string]uint64, len(ents))
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			m[e.Name()] = v
		}
	}
	return m
}

// counterDeltas returns now - base for every counter in now (a counter
// that went backwards, as after a device was re-added, counts from 0).
func counterDeltas(base, now map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(now))
	for k, v := range now {
		b := base[k]
		if v < b {
			b = 0
		}
		out[k] = v - b
	}
	return out
}

// DeviceOverflow is the drop reason for the port's count of messages that
// found no receive posted (see above): per port, not per QP.
const DeviceOverflow = verbs.DropDeviceOverflow

// deviceDrops estimates the port's receive-overflow drops from counter
// deltas: out_of_buffer where the device has it, else rxe's rcvd_pkts
// minus rdma_recvs. ok is false when neither is there.
func deviceDrops(d map[string]uint64) (n uint64, ok bool) {
	if v, has := d["out_of_buffer"]; has {
		return v, true
	}
	rcvd, has1 := d["rcvd_pkts"]
	recvs, has2 := d["rdma_recvs"]
	if !has1 || !has2 {
		return 0, false
	}
	if rcvd <= recvs {
		return 0, true
	}
	return rcvd - recvs, true
}
