//go:build linux

package soft_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Devices lists one device per netdev (IPoIB ones left out), each named:
// no entry more than the namespace's netdevs, none empty.
func TestDevicesOnePerNetdev(t *testing.T) {
	p, err := verbs.Lookup(verbs.Software)
	require.NoError(t, err)
	devs, err := p.Devices()
	require.NoError(t, err)
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	require.NotEmpty(t, devs, "lo at least")
	require.LessOrEqual(t, len(devs), len(ifs))
	for i, d := range devs {
		require.NotEmpty(t, d.Name, "device %d of %d: %+v", i, len(devs), d)
	}
}

// The software device's max_qp_wr is 16384 (rdmanet documents it, in
// ListenConfig's depths), and it is the limit CreateQP holds to: a queue
// that deep is made, one deeper refused, send or receive.
func TestMaxQPWR(t *testing.T) {
	const limit = 16384
	p, err := verbs.Lookup(verbs.Software)
	require.NoError(t, err)
	devs, err := p.Devices()
	require.NoError(t, err)
	for _, d := range devs {
		require.Equal(t, limit, d.MaxQPWR, "%s's MaxQPWR", d.Name)
	}
	for _, cfg := range []verbs.QPConfig{{SendDepth: limit, RecvDepth: limit}, {SendDepth: limit + 1}, {RecvDepth: limit + 1}} {
		id, err := p.Bind(verbs.BindConfig{})
		require.NoError(t, err)
		_, err = id.CreateQP(cfg)
		require.NoError(t, id.Close())
		if cfg.SendDepth > limit || cfg.RecvDepth > limit {
			require.Error(t, err, "CreateQP of depths %d/%d", cfg.SendDepth, cfg.RecvDepth)
		} else {
			require.NoError(t, err, "CreateQP of depths %d/%d", cfg.SendDepth, cfg.RecvDepth)
		}
	}
}
