//go:build linux

package twohost

import (
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/go-rdma/rdmanet/test/rxevm/peer"
	"github.com/stretchr/testify/require"
)

// site is what the VM tells a two-host test (test/rxevm/init, setup2).
type site struct {
	device   string // rxe0 here, and on the peer
	addr     net.IP // this VM's address on the link (rxe0's GID ::ffff:addr)
	netdev   string // the link's netdev here (eth0)
	gidIndex string // rxe0's RoCE v2 GID index of addr
	peer     net.IP // the peer's address on the link
	softAddr net.IP // the peer's software-backend address, in namespace softNS
	softNS   string
	agent    *peer.Client
	// helperEnv is added to the environment of the helpers started on
	// the peer (the benchmark's eager-drain rows).
	helperEnv []string
}

// needPeer skips without RDMANET_TEST_PEER and fails when it is set but a
// variable, the device or the peer's agent is missing.
func needPeer(t *testing.T) *site {
	t.Helper()
	if os.Getenv("RDMANET_TEST_PEER") == "" {
		t.Skip("no peer host: run `make test-rxe2`")
	}
	env := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("RDMANET_TEST_PEER is set but %s is not", name)
		}
		return v
	}
	ip := func(name string) net.IP {
		v := net.ParseIP(env(name)).To4()
		if v == nil {
			t.Fatalf("%s=%q: not an IPv4 address", name, os.Getenv(name))
		}
		return v
	}
	s := &site{
		device:   env("RDMANET_TEST_DEVICE"),
		addr:     ip("RDMANET_TEST_ADDR"),
		netdev:   env("RDMANET_TEST_NETDEV"),
		gidIndex: env("RDMANET_TEST_GID_INDEX"),
		peer:     ip("RDMANET_TEST_PEER"),
		softAddr: ip("RDMANET_TEST_PEER_SOFT_ADDR"),
		softNS:   env("RDMANET_TEST_PEER_SOFT_NETNS"),
	}
	if _, err := os.Stat(filepath.Join("/sys/class/infiniband", s.device)); err != nil {
		t.Fatalf("RDMANET_TEST_DEVICE=%s: device missing: %v", s.device, err)
	}
	agentOnce.Do(func() { agent, agentErr = peer.Dial(env("RDMANET_TEST_PEER_AGENT"), 30*time.Second) })
	require.NoError(t, agentErr, "the peer VM's agent (rxepeer)")
	s.agent = agent
	return s
}

// The agent is dialled once: when the peer is missing, the first test
// waits for it and the others fail at once.
var (
	agentOnce sync.Once
	agent     *peer.Client
	agentErr  error
)

// listen opens an rdma-core conn on this VM's rxe0, joined to group.
func (s *site) listen(t *testing.T, group *net.UDPAddr, opts ...func(*rdmanet.ListenConfig)) *rdmanet.Conn {
	t.Helper()
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendRDMACore, LocalAddr: s.addr, DisableLoopback: true}
	for _, o := range opts {
		o(&lc)
	}
	c, err := lc.ListenMulticast(t.Context(), "rdma", nil, group)
	require.NoError(t, err, "listen on %s for %v", s.addr, group.IP)
	t.Cleanup(func() { c.Close() })
	return c
}
