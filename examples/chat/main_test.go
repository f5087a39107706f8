package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// envChatMain makes the test binary act as the chat itself: the end-to-end
// tests re-exec os.Args[0] with it, so they need no `go build` (the rxe VM
// has no Go toolchain, only the test binaries).
const envChatMain = "RDMANET_CHAT_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envChatMain) == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-group", "10.0.0.1"}, "-group \"10.0.0.1\": want a multicast IP address"},
		{[]string{"-group", "nonsense"}, "want a multicast IP address"},
		{[]string{"-iface", "lo", "-bind", "127.0.0.1"}, "-iface and -bind both choose the port"},
		{[]string{"-bind", "not-an-ip"}, "-bind \"not-an-ip\": not an IP address"},
		{[]string{"-iface", "no-such-netdev0"}, "-iface:"},
		{[]string{"-backend", "ethernet"}, "-backend \"ethernet\": want auto, software or rdma-core"},
		{[]string{"-nick", "two words"}, "-nick: nick \"two words\" has spaces"},
		{[]string{"-nick", ""}, "-nick: empty nick"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-no-such-flag"}, "flag provided but not defined"},
	} {
		var stderr bytes.Buffer
		rc := run(tc.args, strings.NewReader(""), &bytes.Buffer{}, &stderr)
		assert.Equal(t, 2, rc, "%v", tc.args)
		assert.Contains(t, stderr.String(), tc.want, "%v", tc.args)
	}
}

func TestHelpHidesTestingFlags(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	assert.Equal(t, 0, run([]string{"-help"}, strings.NewReader(""), &bytes.Buffer{}, &stderr))
	for _, f := range []string{"-nick", "-group", "-iface", "-bind", "-backend", "-loopback", defaultGroup} {
		assert.Contains(t, stderr.String(), f)
	}
	assert.NotContains(t, stderr.String(), "-drop-every")
	assert.NotContains(t, stderr.String(), "-heartbeat")
}

func TestDefaultNick(t *testing.T) {
	t.Parallel()
	assert.NoError(t, ValidNick(defaultNick()))
}

func TestOptionsDefaultToLoopback(t *testing.T) {
	t.Parallel()
	opt, err := options("alice", defaultGroup, "", "", "auto", false)
	assert.NoError(t, err)
	assert.Nil(t, opt.Iface, "no interface: rdmanet's loopback, never the default route's")
	assert.Nil(t, opt.Listen.LocalAddr)
	assert.True(t, opt.Listen.DisableLoopback)
	assert.Equal(t, "239.255.77.1", opt.Group.IP.String())
	assert.True(t, opt.Group.IP.IsMulticast())
}
