//go:build linux

package main

import (
	"fmt"
	"net"

	"github.com/go-rdma/rdmanet/internal/perf"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// perfNet makes the conns of a run: rdmanet ones, or UDP ones for the
// baseline, all on the same interface.
type perfNet struct {
	cfg *perfConfig
	ifi *net.Interface // nil: loopback (rdmanet); lo for UDP
	// Filled by the first conn: what the run reports.
	backend, device string
	rcvbuf          int // the first receiver's SO_RCVBUF (getsockopt)
}

func (pn *perfNet) listenConfig(sendOnly bool) rdmanet.ListenConfig {
	c := pn.cfg
	if sendOnly && c.sender == senderMember {
		// What a newcomer writes: only the address and device named.
		return rdmanet.ListenConfig{Backend: c.backend, LocalAddr: c.bindIP, Device: c.device}
	}
	lc := rdmanet.ListenConfig{Backend: c.backend, LocalAddr: c.bindIP, Device: c.device,
		SendOnly: sendOnly, DisableLoopback: true, RecvDepth: c.depth}
	if !sendOnly {
		lc.Spin = c.spin
	}
	if sendOnly {
		lc.RecvDepth = 16 // receives nothing
	}
	return lc
}

// sender returns a conn that sends to group; receiver one that receives
// from it.
func (pn *perfNet) sender(group *net.UDPAddr) (perf.Endpoint, error)   { return pn.open(group, true) }
func (pn *perfNet) receiver(group *net.UDPAddr) (perf.Endpoint, error) { return pn.open(group, false) }

func (pn *perfNet) open(group *net.UDPAddr, sendOnly bool) (perf.Endpoint, error) {
	if pn.cfg.baseline == "udp" {
		return pn.openUDP(group, sendOnly)
	}
	e, err := perf.ListenRDMA(pn.listenConfig(sendOnly), pn.ifi, group)
	if err != nil {
		return nil, err
	}
	b := e.C.Backend()
	if pn.backend == "" {
		pn.backend = b.Name
		pn.device = b.Device
		if b.Netdev != "" && b.Netdev != b.Device {
			pn.device += " (" + b.Netdev + ")"
		}
	}
	if !sendOnly && pn.rcvbuf == 0 && b.Name == rdmanet.BackendSoftware {
		pn.rcvbuf = 2 * e.C.ReadBuffer() // the grant; getsockopt (RcvBuf's unit) reports twice it
	}
	return e, nil
}

// openUDP is the net.UDPConn baseline: a multicast receiver on the
// interface, or a sender with IP_MULTICAST_IF set to it, connected to the
// group or not (-sender).
func (pn *perfNet) openUDP(group *net.UDPAddr, sendOnly bool) (perf.Endpoint, error) {
	ifi := pn.ifi
	if ifi == nil {
		lo, err := perf.Loopback()
		if err != nil {
			return nil, err
		}
		ifi = lo
	}
	if pn.backend == "" {
		pn.backend, pn.device = "udp", ifi.Name
	}
	if sendOnly {
		return perf.DialUDP(ifi, &net.UDPAddr{IP: pn.cfg.bindIP}, group, pn.cfg.sender != senderUnconnected)
	}
	e, err := perf.ListenUDP(ifi, group, pn.cfg.rcvbuf)
	if err != nil {
		return nil, err
	}
	if pn.rcvbuf == 0 {
		if pn.rcvbuf, err = e.RcvBuf(); err != nil {
			e.Close()
			return nil, fmt.Errorf("udp: getsockopt SO_RCVBUF: %w", err)
		}
	}
	return e, nil
}
