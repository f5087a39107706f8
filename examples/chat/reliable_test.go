package main

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/stretchr/testify/require"
)

// TestEndToEndReliableLoss: two chat processes with -reliable, in a
// private network namespace where nftables drops 20% of the RoCEv2
// packets (UDP 4791) on lo. Every line alice types appears in bob's
// transcript once, in order, and no loss is reported. It needs root and
// nft; RDMANET_TEST_NFT=1 makes their absence a failure.
func TestEndToEndReliableLoss(t *testing.T) {
	if testDevice != "" {
		t.Skip("kernel loss with nftables runs on the software backend on the host")
	}
	if !testenv.IsNetnsChild(t) {
		_, nftErr := exec.LookPath("nft")
		if nftErr != nil || !testenv.CanUnshare() {
			if testenv.NFT() {
				t.Fatalf("%s=1 but nft or unshare -n is not usable (nft: %v)", testenv.EnvNFT, nftErr)
			}
			t.Skip("needs root, unshare -n and nft (apt-get install nftables)")
		}
		testenv.RunInOwnNetns(t, "nft add table inet t",
			"nft add chain inet t in '{ type filter hook input priority 0; }'",
			"nft add rule inet t in udp dport 4791 numgen random mod 100 '<' 20 counter drop")
		return
	}
	group := newGroup().IP.String()
	args := []string{"-group", group, "-backend", "software", "-reliable"}
	alice := startProc(t, "alice", args...)
	bob := startProc(t, "bob", args...)
	// A receiver starts a sender's stream where it first hears it: when
	// bob's hello is lost, alice meets him by his next heartbeat.
	alice.out.waitFor(t, "bob's presence", func(s string) bool { return s == "* bob is here" || s == "* bob joined" })
	bob.out.waitFor(t, "alice's presence", func(s string) bool { return s == "* alice is here" || s == "* alice joined" })
	const n = 40
	for i := range n {
		alice.say(t, fmt.Sprintf("line %d", i))
	}
	bob.out.waitLine(t, fmt.Sprintf("<alice> line %d", n-1))
	all, _ := bob.out.snapshot()
	var got []string
	for _, l := range all {
		if strings.HasPrefix(l, "<alice> line ") {
			got = append(got, l)
		}
		require.NotContains(t, l, "lost", "bob's transcript reports a loss")
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("<alice> line %d", i)
	}
	require.Equal(t, want, got, "every line once, in order")
	bob.say(t, "/stats")
	line := bob.out.waitFor(t, "reliable stats", func(s string) bool { return strings.HasPrefix(s, "* reliable: NAKs sent ") })
	all, _ = bob.out.snapshot()
	t.Logf("bob: %s", all[line])
	bob.say(t, "/quit")
	bob.wait(t)
	alice.in.Close()
	alice.wait(t)
}
