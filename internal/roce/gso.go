package roce

// GSO limits: UDP_MAX_SEGMENTS in every kernel since 4.18, and an IPv4
// datagram's largest UDP payload.
const (
	MaxGSOSegs  = 64
	MaxGSOBytes = 0xFFFF - IPv4HdrSize - UDPHdrSize
)

// CutRuns cuts a batch of datagrams into GSO runs, the way the kernel's
// UDP_SEGMENT takes them: a run is datagrams to one destination, each of
// its first one's length except a shorter last one, at most MaxGSOSegs of
// them and MaxGSOBytes of UDP payload in all. Datagram i goes to dst[i]
// and is dlen[i] bytes. CutRuns appends the first index of each run to
// runs and numbers each datagram's place in its run into segID: the IP ID
// the kernel gives that segment, which its ICRC covers. Without gso every
// datagram is a run of its own. It touches nothing else (a table test
// drives it without a socket).
func CutRuns(runs []int, segID []uint16, dst [][4]byte, dlen []int, gso bool) []int {
	runLen, runBytes, open := 0, 0, false
	for i, n := range dlen {
		if open && dst[i] == dst[i-1] && n <= runLen &&
			i-runs[len(runs)-1] < MaxGSOSegs && runBytes+n <= MaxGSOBytes {
			segID[i] = segID[i-1] + 1
			runBytes += n
			open = n == runLen // a shorter segment ends the run
			continue
		}
		runs = append(runs, i)
		segID[i] = 0
		runLen, runBytes, open = n, n, gso
	}
	return runs
}
