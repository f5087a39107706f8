package infiniband

// ibMTUs are the IB MTUs (enum ib_mtu), largest first.
var ibMTUs = [...]int{4096, 2048, 1024, 512, 256}

// FloorIBMTU rounds a byte MTU down to an IB MTU (4096, 2048, 1024, 512,
// 256), 0 below 256.
func FloorIBMTU(m int) int {
	for _, v := range ibMTUs {
		if m >= v {
			return v
		}
	}
	return 0
}

// RoCEMTU is the path MTU RoCE uses over a netdev of MTU netdevMTU, as the
// kernel's iboe_get_mtu computes it (the MTU rdma_cm puts in RoCE path
// records and multicast joins): the netdev MTU less the RoCE headers (GRH
// 40, UDP 8, BTH 12, the largest extended header 28, ICRC 4, XRC 4),
// rounded down to an IB MTU. 1500 gives 1024, 9000 and loopback's 65536
// give 4096; below 352 it is 0.
func RoCEMTU(netdevMTU int) int { return FloorIBMTU(netdevMTU - (40 + 8 + 12 + 4 + 28 + 4)) }
