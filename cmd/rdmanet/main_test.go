package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const fabricRoot = "../../ipoib/testdata/fabric"

func runCmd(t *testing.T, root string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(&env{stdout: &out, stderr: &errb, root: root}, args)
	return out.String(), errb.String(), code
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create %s", path)
	assert.Equal(t, string(want), got, "output differs from %s (go test -update rewrites it)", path)
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		root string
		args []string
	}{
		{"devices_fabric", fabricRoot, []string{"devices"}},
		{"devices_nordma", "../../ipoib/testdata/nordma", []string{"devices"}},
		{"devices_root_flag", "/nonexistent", []string{"devices", "-root", fabricRoot}},
		{"mgid_ipv4", "/", []string{"mgid", "239.1.2.3"}},
		{"mgid_pkey_scope", "/", []string{"mgid", "-pkey", "0x8001", "-scope", "5", "239.1.2.3"}},
		{"mgid_flags_after", "/", []string{"mgid", "239.1.2.3", "-pkey", "7fff", "-scope", "global"}},
		{"mgid_ipv6", "/", []string{"mgid", "ff02::1"}},
		{"mgid_reverse_ipoib", "/", []string{"mgid", "ff12:401b:ffff::f01:203"}},
		{"mgid_reverse_rdmacm", "/", []string{"mgid", "ff12:4001:8001::f01:203"}},
		{"mgid_reverse_rocev2", "/", []string{"mgid", "::ffff:239.1.2.3"}},
		{"mgid_reverse_rocev1", "/", []string{"mgid", "ff0e::ffff:ef01:203"}},
		{"mgid_reverse_broadcast", "/", []string{"mgid", "ff12:401b:ffff::ffff:ffff"}},
		{"mgid_sa_assigned", "/", []string{"mgid", "ff15:a01b:ffff::1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCmd(t, tc.root, tc.args...)
			require.Equal(t, 0, code, "stderr: %s", errOut)
			assert.Empty(t, errOut)
			golden(t, tc.name, out)
			for i, l := range strings.Split(out, "\n") {
				assert.False(t, strings.HasSuffix(l, " "), "line %d has trailing spaces: %q", i+1, l)
			}
		})
	}
}

// The headline vectors, checked directly as well as through the golden file.
func TestMGIDHeadline(t *testing.T) {
	out, _, code := runCmd(t, "/", "mgid", "239.1.2.3")
	require.Equal(t, 0, code)
	for _, re := range []string{
		`(?m)^IPoIB \(RFC 4391\)\s+ff12:401b:ffff::f01:203$`,
		`(?m)^rdma_cm UDP on InfiniBand\s+ff12:4001:ffff::f01:203$`,
		`(?m)^rdma_cm on RoCE v2\s+::ffff:239\.1\.2\.3$`,
		`(?m)^rdma_cm on RoCE v1\s+ff0e::ffff:ef01:203$`,
		`(?m)^IPoIB broadcast group\s+ff12:401b:ffff::ffff:ffff$`,
	} {
		assert.Regexp(t, regexp.MustCompile(re), out)
	}
}

func TestDevicesFabricContent(t *testing.T) {
	out, _, code := runCmd(t, fabricRoot, "devices")
	require.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^rdma-core\s+available\s`, out)
	assert.Regexp(t, `(?m)^\s+GID\[1\]\s+::ffff:10\.99\.0\.1\s+RoCE v2\s+veth0$`, out)
	assert.Contains(t, out, "port 2  DOWN (Disabled)")
	assert.Contains(t, out, "multicast no (RNIC transport)")
	assert.Regexp(t, `(?m)^ib0\.8001\s+IPoIB\s+2044\s+up\s+mlx5_0/1\s+0x8001 \(child of ib0\)$`, out)
}

func TestDevicesNoRDMA(t *testing.T) {
	out, _, code := runCmd(t, "../../ipoib/testdata/nordma", "devices")
	require.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^software\s+available\s`, out)
	assert.Regexp(t, `(?m)^rdma-core\s+unavailable\s+no devices in`, out)
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "usage: rdmanet COMMAND"},
		{"unknown command", []string{"frob"}, `unknown command "frob"`},
		{"mgid no group", []string{"mgid"}, "no group given"},
		{"mgid two groups", []string{"mgid", "239.1.2.3", "239.1.2.4"}, "one group at a time"},
		{"mgid not an address", []string{"mgid", "bogus"}, `bad group "bogus"`},
		{"mgid hostname-like", []string{"mgid", "239.1.2"}, `bad group "239.1.2"`},
		{"mgid zone", []string{"mgid", "ff02::1%lo"}, `bad group "ff02::1%lo"`},
		{"mgid unicast v4", []string{"mgid", "10.0.0.1"}, "10.0.0.1 is not a multicast group"},
		{"mgid unicast v6", []string{"mgid", "fe80::1"}, "fe80::1 is neither a multicast group nor an MGID"},
		{"mgid mapped unicast", []string{"mgid", "::ffff:10.0.0.1"}, "neither a multicast group nor an MGID"},
		{"pkey too big", []string{"mgid", "-pkey", "0x10000", "239.1.2.3"}, `bad -pkey "0x10000"`},
		{"pkey not hex", []string{"mgid", "-pkey", "zz", "239.1.2.3"}, `bad -pkey "zz"`},
		{"pkey member bit only", []string{"mgid", "-pkey", "0x8000", "239.1.2.3"}, "0x8000 is not a valid partition key"},
		{"pkey zero", []string{"mgid", "-pkey", "0", "239.1.2.3"}, "not a valid partition key"},
		{"scope too big", []string{"mgid", "-scope", "16", "239.1.2.3"}, `bad -scope "16"`},
		{"scope name", []string{"mgid", "-scope", "planet", "239.1.2.3"}, `bad -scope "planet"`},
		{"unknown flag", []string{"mgid", "-frob", "239.1.2.3"}, "flag provided but not defined: -frob"},
		{"devices extra arg", []string{"devices", "mlx5_0"}, `unexpected argument "mlx5_0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCmd(t, fabricRoot, tc.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out, "bad input prints nothing on stdout")
			assert.Contains(t, errOut, tc.want)
		})
	}
}

func TestRuntimeErrorExits1(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "sys/class/infiniband/x0/ports/1")
	require.NoError(t, os.MkdirAll(p, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(p, "state"), []byte("garbage\n"), 0o644))
	out, errOut, code := runCmd(t, root, "devices")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "rdmanet devices: ipoib:")
	assert.Contains(t, errOut, "state")
}

func TestHelp(t *testing.T) {
	out, _, code := runCmd(t, "/", "help")
	assert.Equal(t, 0, code)
	for _, c := range commands {
		assert.Contains(t, out, "rdmanet "+c.name)
	}
	_, errOut, code := runCmd(t, "/", "mgid", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, errOut, "-pkey")
}
