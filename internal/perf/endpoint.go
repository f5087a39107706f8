package perf

import (
	"github.com/go-rdma/rdmanet/rdmanet"

	"encoding/binary"
	"time"
)

// Endpoint is one side of a run: a conn that sends to one destination,
// receives, or both. RDMA and UDP implement it.
type Endpoint interface {
	// Send sends b as one datagram.
	Send(b []byte) error
	// SendBatch sends each of bs as one datagram.
	SendBatch(bs [][]byte) error
	// Recv reads one datagram into b and returns its length.
	Recv(b []byte) (int, error)
	// RecvBatch reads up to len(bufs) datagrams, their lengths into ns,
	// and returns how many it read.
	RecvBatch(bufs [][]byte, ns []int) (int, error)
	SetReadDeadline(t time.Time) error
	Close() error
	// MTU is the largest datagram the endpoint carries.
	MTU() int
}

// SocketBuffer is the SO_RCVBUF, in bytes, that every UDP baseline
// receiver asks for: what the software backend asks for its sockets
// (rdmanet.SoftwareSocketBuffer), so that loss compares like with like.
const SocketBuffer = rdmanet.SoftwareSocketBuffer

// The messages of a run carry a sequence number in their first SeqSize
// bytes (little endian). A marker, the sequence number Marker followed by
// the number of messages sent (MarkerSize bytes in all), ends a
// throughput run or an echo.
const (
	SeqSize    = 8
	MarkerSize = 16
	Marker     = ^uint64(0)
)

// PutSeq writes seq into the first SeqSize bytes of b.
func PutSeq(b []byte, seq uint64) { binary.LittleEndian.PutUint64(b, seq) }

// Seq reads the sequence number from the first SeqSize bytes of b.
func Seq(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// markerTotal returns the total a marker carries and whether b is a
// marker that carries one.
func markerTotal(b []byte) (total uint64, ok bool) {
	if len(b) < MarkerSize || Seq(b) != Marker {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[SeqSize:]), true
}

// markerGap is how far apart SendMarkers sends its markers.
const markerGap = 2 * time.Millisecond

// SendMarkers sends five end markers through tx, 2 ms apart, each
// carrying total: a receiver that misses one still sees another.
func SendMarkers(tx Endpoint, total uint64) {
	m := make([]byte, MarkerSize)
	PutSeq(m, Marker)
	binary.LittleEndian.PutUint64(m[SeqSize:], total)
	for i := range 5 {
		if i > 0 {
			time.Sleep(markerGap)
		}
		if tx.Send(m) != nil {
			return
		}
	}
}

// CloseAll closes every endpoint of eps that is not nil.
func CloseAll(eps ...Endpoint) {
	for _, ep := range eps {
		if ep != nil {
			ep.Close()
		}
	}
}
