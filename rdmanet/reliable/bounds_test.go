package reliable

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// Every Config field's bounds: each refused value names the field, its
// value and the bound; the edge values are accepted. MTU 1024 unless a
// row says otherwise (a 1088-byte slot).
func TestConfigBounds(t *testing.T) {
	const us, ms = time.Microsecond, time.Millisecond
	for _, tc := range []struct {
		name string
		cfg  Config
		mtu  int
		want string // "" : accepted
	}{
		{"zero", Config{}, 0, ""},
		{"zero at MTU 4096", Config{}, 4096, ""},
		{"MTU too small", Config{}, 28, "MTU 28 leaves no room"},

		{"MaxMessage negative", Config{MaxMessage: -1}, 0, "Config.MaxMessage -1 is negative (0 takes the default, 65536)"},
		{"MaxMessage 1", Config{MaxMessage: 1}, 0, ""},
		{"MaxMessage max", Config{MaxMessage: 65535 * 996, Window: 131070, RecvWindow: 131070, MaxSenders: 1}, 0, ""},
		{"MaxMessage over", Config{MaxMessage: 65535*996 + 1}, 0, "Config.MaxMessage 65272861 is over the limit 65272860 (65535 fragments of 996 bytes at MTU 1024)"},
		{"MaxMessage huge", Config{MaxMessage: 1 << 62}, 0, "Config.MaxMessage 4611686018427387904 is over the limit 65272860"},

		{"Window negative", Config{Window: -1}, 0, "Config.Window -1 is negative (0 takes the default, 4096)"},
		{"Window 15", Config{Window: 15, MaxMessage: 996}, 0, "Config.Window 15 is under the floor 16"},
		{"Window 16", Config{Window: 16, MaxMessage: 8 * 996}, 0, ""},
		{"Window two messages", Config{Window: 131}, 0, "Config.Window 131 is under the floor 132 (two largest messages: MaxMessage 65536 is 66 datagrams at MTU 1024)"},
		{"Window 132", Config{Window: 132}, 0, ""},
		{"Window max", Config{Window: 1 << 20}, 512, ""},
		{"Window over", Config{Window: 1<<20 + 1}, 0, "Config.Window 1048577 is over the limit 1048576"},
		{"Window 1<<40", Config{Window: 1 << 40}, 0, "reliable: Config.Window 1099511627776 is over the limit 1048576"},
		{"Window bytes", Config{Window: 1 << 20}, 4096, "Config.Window 1048576 takes 4362076160 bytes (4160-byte slots at MTU 4096), over the limit 1073741824 (1 GiB)"},
		{"Window bytes edge", Config{Window: 258111}, 4096, ""},
		{"Window bytes edge+1", Config{Window: 258112}, 4096, "over the limit 1073741824"},
		// A keyed conn's payload room is the MTU less the trailer; its
		// slots hold the whole datagram.
		{"Window bytes keyed", Config{Window: 258112, Key: make([]byte, 32)}, 4096 - trailerLen, "Config.Window 258112 takes 1073745920 bytes (4160-byte slots at MTU 4096)"},

		{"RecvWindow negative", Config{RecvWindow: -5}, 0, "Config.RecvWindow -5 is negative (0 takes the default, 1024)"},
		{"RecvWindow 15", Config{RecvWindow: 15, MaxMessage: 996}, 0, "Config.RecvWindow 15 is under the floor 16"},
		{"RecvWindow two messages", Config{RecvWindow: 100}, 0, "Config.RecvWindow 100 is under the floor 132 (two largest messages"},
		{"RecvWindow max", Config{RecvWindow: 1 << 20, MaxSenders: 15}, 512, ""},
		{"RecvWindow over", Config{RecvWindow: 1<<20 + 1}, 0, "Config.RecvWindow 1048577 is over the limit 1048576"},
		{"RecvWindow 1<<40", Config{RecvWindow: 1 << 40}, 0, "Config.RecvWindow 1099511627776 is over the limit 1048576"},
		{"RecvWindow bytes", Config{RecvWindow: 258112, MaxSenders: 1}, 4096, "Config.RecvWindow 258112 takes 1073745920 bytes a sender (4160-byte slots at MTU 4096), over the limit 1073741824 (1 GiB)"},
		{"RecvWindow × MaxSenders", Config{RecvWindow: 1 << 20, MaxSenders: 32}, 512, "Config.RecvWindow 1048576 for Config.MaxSenders 32 senders takes up to 19327352832 bytes (576-byte slots at MTU 512), over the limit 17179869184 (16 GiB)"},

		{"MaxSenders negative", Config{MaxSenders: -1}, 0, "Config.MaxSenders -1 is negative (0 takes the default, 64)"},
		{"MaxSenders max", Config{MaxSenders: 1 << 16, RecvWindow: 132}, 0, ""},
		{"MaxSenders over", Config{MaxSenders: 1<<16 + 1}, 0, "Config.MaxSenders 65537 is over the limit 65536"},
		{"MaxSenders 1<<40", Config{MaxSenders: 1 << 40}, 0, "Config.MaxSenders 1099511627776 is over the limit 65536"},

		{"NAKDelay negative", Config{NAKDelay: -1}, 0, "Config.NAKDelay -1ns is negative"},
		{"NAKDelay under", Config{NAKDelay: 999}, 0, "Config.NAKDelay 999ns is under the floor 1µs"},
		{"NAKDelay 1µs", Config{NAKDelay: us}, 0, ""},
		{"NAKDelay 1s", Config{NAKDelay: time.Second}, 0, ""},
		{"NAKDelay over", Config{NAKDelay: time.Second + 1}, 0, "Config.NAKDelay 1.000000001s is over the limit 1s"},

		{"InitialRTT negative", Config{InitialRTT: -us}, 0, "Config.InitialRTT -1µs is negative (0 takes the default, 200µs)"},
		{"InitialRTT under", Config{InitialRTT: 1}, 0, "Config.InitialRTT 1ns is under the floor 1µs"},
		{"InitialRTT edges", Config{InitialRTT: us}, 0, ""},
		{"InitialRTT 1s", Config{InitialRTT: time.Second}, 0, ""},
		{"InitialRTT over", Config{InitialRTT: time.Hour}, 0, "Config.InitialRTT 1h0m0s is over the limit 1s"},

		{"RepairLinger negative", Config{RepairLinger: -1}, 0, "Config.RepairLinger -1ns is negative (0 takes the default, 20µs)"},
		{"RepairLinger under", Config{RepairLinger: 1}, 0, "Config.RepairLinger 1ns is under the floor 1µs"},
		{"RepairLinger 1µs", Config{RepairLinger: us}, 0, ""},
		{"RepairLinger over", Config{RepairLinger: 2 * time.Second}, 0, "Config.RepairLinger 2s is over the limit 1s"},

		{"HeartbeatInterval negative", Config{HeartbeatInterval: -1}, 0, "Config.HeartbeatInterval -1ns is negative (0 takes the default, 100µs)"},
		{"HeartbeatInterval under", Config{HeartbeatInterval: 9 * us}, 0, "Config.HeartbeatInterval 9µs is under the floor 10µs"},
		{"HeartbeatInterval 10µs", Config{HeartbeatInterval: 10 * us}, 0, ""},
		{"HeartbeatInterval 1s", Config{HeartbeatInterval: time.Second, HeartbeatMax: time.Second}, 0, ""},
		{"HeartbeatInterval over", Config{HeartbeatInterval: time.Second + 1}, 0, "Config.HeartbeatInterval 1.000000001s is over the limit 1s"},

		{"HeartbeatMax negative", Config{HeartbeatMax: -1}, 0, "Config.HeartbeatMax -1ns is negative (0 takes the default, 100ms)"},
		{"HeartbeatMax under", Config{HeartbeatMax: 999 * us}, 0, "Config.HeartbeatMax 999µs is under the floor 1ms"},
		{"HeartbeatMax 1ms", Config{HeartbeatMax: ms}, 0, ""},
		{"HeartbeatMax under interval", Config{HeartbeatInterval: 500 * ms, HeartbeatMax: 100 * ms}, 0, "Config.HeartbeatMax 100ms is under the floor 500ms (HeartbeatInterval 500ms)"},
		{"HeartbeatMax = interval", Config{HeartbeatInterval: 500 * ms, HeartbeatMax: 500 * ms}, 0, ""},
		{"HeartbeatMax default under interval", Config{HeartbeatInterval: 200 * ms}, 0, "Config.HeartbeatMax 100ms is under the floor 200ms (HeartbeatInterval 200ms)"},
		{"HeartbeatMax 1min", Config{HeartbeatMax: time.Minute}, 0, ""},
		{"HeartbeatMax over", Config{HeartbeatMax: time.Hour}, 0, "Config.HeartbeatMax 1h0m0s is over the limit 1m0s"},

		{"SenderTimeout negative", Config{SenderTimeout: -1}, 0, "Config.SenderTimeout -1ns is negative (0 takes the default, 1s)"},
		{"SenderTimeout under", Config{SenderTimeout: 999 * us}, 0, "Config.SenderTimeout 999µs is under the floor 1ms"},
		{"SenderTimeout 1ms", Config{SenderTimeout: ms}, 0, ""},
		{"SenderTimeout 1h", Config{SenderTimeout: time.Hour}, 0, ""},
		{"SenderTimeout over", Config{SenderTimeout: time.Hour + 1}, 0, "Config.SenderTimeout 1h0m0.000000001s is over the limit 1h0m0s"},

		{"FlowControl negative", Config{FlowControl: -1}, 0, "Config.FlowControl FlowControl(-1) is negative"},
		{"FlowControl min", Config{FlowControl: FlowMin}, 0, ""},
		{"FlowControl over", Config{FlowControl: 2}, 0, "Config.FlowControl FlowControl(2) is over the limit min"},

		{"StatusInterval negative", Config{StatusInterval: -1}, 0, "Config.StatusInterval -1ns is negative (0 takes the default, 1ms)"},
		{"StatusInterval under", Config{StatusInterval: 99 * us}, 0, "Config.StatusInterval 99µs is under the floor 100µs"},
		{"StatusInterval 100µs", Config{StatusInterval: 100 * us}, 0, ""},
		{"StatusInterval 1h", Config{StatusInterval: time.Hour}, 0, ""},
		{"StatusInterval over", Config{StatusInterval: 2 * time.Hour}, 0, "Config.StatusInterval 2h0m0s is over the limit 1h0m0s"},

		{"ReceiverTimeout negative", Config{ReceiverTimeout: -1}, 0, "Config.ReceiverTimeout -1ns is negative (0 takes the default, 500ms)"},
		{"ReceiverTimeout under", Config{ReceiverTimeout: us}, 0, "Config.ReceiverTimeout 1µs is under the floor 1ms"},
		{"ReceiverTimeout 1ms", Config{ReceiverTimeout: ms}, 0, ""},
		{"ReceiverTimeout 1h", Config{ReceiverTimeout: time.Hour}, 0, ""},
		{"ReceiverTimeout over", Config{ReceiverTimeout: 1 << 62}, 0, "Config.ReceiverTimeout 1281023h53m38.427387904s is over the limit 1h0m0s"},

		{"Linger negative", Config{Linger: -1}, 0, ""},
		{"Linger most negative", Config{Linger: -1 << 63}, 0, ""},
		{"Linger 1min", Config{Linger: time.Minute}, 0, ""},
		{"Linger over", Config{Linger: time.Minute + 1}, 0, "Config.Linger 1m0.000000001s is over the limit 1m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mtu := tc.mtu
			if mtu == 0 {
				mtu = 1024
			}
			cfg := tc.cfg
			err := cfg.setDefaults(mtu)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "reliable: ")
		})
	}
}

// The defaults fill every zero field, and a valid config keeps its values.
func TestConfigDefaults(t *testing.T) {
	var c Config
	require.NoError(t, c.setDefaults(1024))
	require.Equal(t, Config{
		MaxMessage: 64 << 10, Window: 4096, RecvWindow: 1024, MaxSenders: 64,
		InitialRTT: 200 * time.Microsecond, RepairLinger: 20 * time.Microsecond,
		HeartbeatInterval: 100 * time.Microsecond, HeartbeatMax: 100 * time.Millisecond,
		SenderTimeout: time.Second, StatusInterval: time.Millisecond,
		ReceiverTimeout: 500 * time.Millisecond, Linger: 50 * time.Millisecond,
	}, c)
	set := Config{MaxMessage: 8 << 10, Window: 64, RecvWindow: 64, MaxSenders: 3, NAKDelay: time.Millisecond,
		InitialRTT: time.Millisecond, RepairLinger: time.Millisecond, HeartbeatInterval: time.Millisecond,
		HeartbeatMax: time.Second, SenderTimeout: time.Minute, FlowControl: FlowMin, StatusInterval: time.Hour,
		ReceiverTimeout: time.Hour, Linger: -1, UnicastRepair: true, FromWindowStart: true}
	c = set
	require.NoError(t, c.setDefaults(1024))
	require.Equal(t, set, c)
}

// Listen with a refused config returns the error (no panic, no
// out-of-memory death) and leaves no file descriptor open: the rdmanet
// conn it opened is closed. New refuses a nil conn.
func TestListenRefusedConfig(t *testing.T) {
	fds := func() int {
		es, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		return len(es)
	}
	group := newGroup()
	warm := listenT(t, group, Config{}) // the QPN block and netlink view stay open for the process
	_ = warm
	before := fds()
	for _, cfg := range []Config{
		{Window: 1 << 40},
		{Window: 1 << 26},
		{MaxSenders: 1 << 40},
		{RecvWindow: 1 << 40},
		{HeartbeatMax: -1},
		{StatusInterval: -1, FlowControl: FlowMin},
		{SenderTimeout: -1},
	} {
		c, err := Listen(context.Background(), testListenConfig(), "rdma", nil, group, cfg)
		require.Error(t, err, "config %+v", cfg)
		require.Nil(t, c)
		require.ErrorContains(t, err, "reliable: Config.")
	}
	require.Equal(t, before, fds(), "file descriptors after the refused Listens")
	_, err := New(nil, group, Config{})
	require.ErrorContains(t, err, "nil")
}

// A write longer than MaxMessage names that limit and its value (not the
// path MTU), and is still rdmanet.ErrMessageTooLong.
func TestWriteTooLongNamesMaxMessage(t *testing.T) {
	group := newGroup()
	c := listenT(t, group, Config{MaxMessage: 10000})
	_, err := c.WriteTo(make([]byte, 10001), group)
	require.ErrorIs(t, err, rdmanet.ErrMessageTooLong)
	require.ErrorContains(t, err, "reliable: 10001-byte message longer than Config.MaxMessage 10000")
	require.NotContains(t, err.Error(), "MTU")
	n, err := c.WriteBatch([]rdmanet.Message{{Buffer: make([]byte, 10)}, {Buffer: make([]byte, 20000)}})
	require.ErrorIs(t, err, rdmanet.ErrMessageTooLong)
	require.Equal(t, 1, n, "the message before the long one is sent")
	require.ErrorContains(t, err, "reliable: 20000-byte message longer than Config.MaxMessage 10000")
}
