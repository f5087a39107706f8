//go:build linux

package rdmacore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDeviceDrops(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    map[string]uint64
		want uint64
		ok   bool
	}{
		{"rxe flood", map[string]uint64{"rcvd_pkts": 100000, "rdma_recvs": 512, "sent_pkts": 3}, 99488, true},
		{"rxe multicast fan-out hides loss", map[string]uint64{"rcvd_pkts": 10, "rdma_recvs": 20}, 0, true},
		{"mlx5 out_of_buffer wins", map[string]uint64{"out_of_buffer": 7, "rcvd_pkts": 100, "rdma_recvs": 1}, 7, true},
		{"nothing to tell", map[string]uint64{"sent_pkts": 5}, 0, false},
		{"no counters", nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := deviceDrops(tc.d)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestCounterDeltas(t *testing.T) {
	got := counterDeltas(map[string]uint64{"a": 5, "b": 9, "gone": 1}, map[string]uint64{"a": 8, "b": 2, "new": 4})
	require.Equal(t, map[string]uint64{"a": 3, "b": 2, "new": 4}, got, "a counter that went backwards counts from 0")
}

func TestReadHWCounters(t *testing.T) {
	root := t.TempDir()
	old := sysfsRoot
	sysfsRoot = root
	defer func() { sysfsRoot = old }()
	require.Nil(t, readHWCounters("rxe0", 1), "no hw_counters directory")
	dir := filepath.Join(root, "sys/class/infiniband/rxe0/ports/1/hw_counters")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	for name, v := range map[string]string{"rcvd_pkts": "100000\n", "rdma_recvs": "512\n", "junk": "x\n"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644))
	}
	require.Equal(t, map[string]uint64{"rcvd_pkts": 100000, "rdma_recvs": 512}, readHWCounters("rxe0", 1))
}
