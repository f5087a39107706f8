//go:build linux

package rdmanet_test

import (
	"fmt"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// Which backends run here, and the devices, ports and GIDs each sees: the
// first part of what `rdmanet devices` prints.
func ExampleBackends() {
	for _, b := range rdmanet.Backends() {
		if b.Unavailable != nil {
			fmt.Printf("%s: unavailable: %v\n", b.Name, b.Unavailable)
			continue
		}
		for _, d := range b.Devices {
			for _, p := range d.Ports {
				fmt.Printf("%s %s port %d %s mtu %d netdev %s\n", b.Name, d.Name, p.Port, p.State, p.ActiveMTU, p.Netdev)
				for _, g := range p.GIDs {
					fmt.Printf("  GID[%d] %s %s\n", g.Index, g.GID, g.Type)
				}
			}
		}
	}
}
