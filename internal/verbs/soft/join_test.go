//go:build linux

package soft_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// With net.ipv4.igmp_max_memberships 0 no socket may join a group: the
// devices say they cannot do multicast (MaxMcastGroups 0) and a join
// fails with ErrGroupLimit. (In a network namespace of its own: the
// sysctl is the namespace's.)
func TestNoGroupsAllowed(t *testing.T) {
	if !testenv.InOwnNetns(t) {
		return
	}
	require.NoError(t, os.WriteFile("/proc/sys/net/ipv4/igmp_max_memberships", []byte("0"), 0o644))
	devs, err := soft.Provider{}.Devices()
	require.NoError(t, err)
	require.NotEmpty(t, devs)
	for _, d := range devs {
		require.Zero(t, d.MaxMcastGroups, "%s", d.Name)
		require.Zero(t, d.MaxQPMcastAttach, "%s", d.Name)
	}
	e := newEndpoint(t, verbs.QPConfig{})
	_, err = e.id.Join(t.Context(), verbs.Group{IP: []byte{239, 1, 2, 3}}, verbs.JoinOptions{})
	require.ErrorIs(t, err, verbs.ErrGroupLimit)
}
