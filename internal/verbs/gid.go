package verbs

import "github.com/go-rdma/rdmanet/internal/infiniband"

// GID is a 128-bit global identifier: a port's address (GID table entry) or
// a multicast group's MGID. It is the module's one GID type
// (internal/infiniband's, which ipoib exports and rdmanet.Addr carries), so a
// GID crosses the layers with no conversion.
type GID = infiniband.GID

// Well-known values of the fabric, defined in internal/infiniband.
const (
	// MulticastQPN is the destination QP number of every multicast send
	// (infiniband.MulticastQPN, typed for the WR and WC fields).
	MulticastQPN uint32 = infiniband.MulticastQPN
	// DefaultPKey is the default partition key (full member).
	DefaultPKey = infiniband.DefaultPKey
)
