//go:build linux

package soft

// cutRuns cuts a batch of datagrams into GSO runs, the way the kernel's
// UDP_SEGMENT takes them: a run is datagrams to one destination, each of
// its first one's length except a shorter last one, at most maxGSOSegs of
// them and maxGSOBytes of UDP payload in all. Datagram i goes to dst[i]
// and is dlen[i] bytes. cutRuns appends the first index of each run to
// runs and numbers each datagram's place in its run into segID: the IP ID
// the kernel gives that segment, which its ICRC covers. Without gso every
// datagram is a run of its own. It touches nothing else (a table test
// drives it without a socket).
func cutRuns(runs []int, segID []uint16, dst [][4]byte, dlen []int, gso bool) []int {
	runLen, runBytes, open := 0, 0, false
	for i, n := range dlen {
		if open && dst[i] == dst[i-1] && n <= runLen &&
			i-runs[len(runs)-1] < maxGSOSegs && runBytes+n <= maxGSOBytes {
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
