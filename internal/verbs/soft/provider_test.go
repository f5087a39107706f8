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
// that deep is made, one deeper refused, send or receive. So is its
// max_inline, 4096, the largest UD payload (rdmanet's ListenConfig takes
// MaxInline up to it): a QP asking for it is made and reports it.
func TestMaxQPWR(t *testing.T) {
	const limit, inline = 16384, 4096
	p, err := verbs.Lookup(verbs.Software)
	require.NoError(t, err)
	devs, err := p.Devices()
	require.NoError(t, err)
	for _, d := range devs {
		require.Equal(t, limit, d.MaxQPWR, "%s's MaxQPWR", d.Name)
	}
	for _, cfg := range []verbs.QPConfig{{SendDepth: limit, RecvDepth: limit, MaxInline: inline}, {SendDepth: limit + 1}, {RecvDepth: limit + 1}, {MaxInline: inline + 1}} {
		id, err := p.Bind(verbs.BindConfig{})
		require.NoError(t, err)
		qp, err := id.CreateQP(cfg)
		if err == nil {
			require.Equal(t, inline, qp.MaxInline())
		}
		require.NoError(t, id.Close())
		if cfg.SendDepth > limit || cfg.RecvDepth > limit || cfg.MaxInline > inline {
			require.Error(t, err, "CreateQP of depths %d/%d, inline %d", cfg.SendDepth, cfg.RecvDepth, cfg.MaxInline)
		} else {
			require.NoError(t, err, "CreateQP of depths %d/%d, inline %d", cfg.SendDepth, cfg.RecvDepth, cfg.MaxInline)
		}
	}
}
