package reliable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A refused value names the reason of a narrowed bound only when that
// bound is the one refused: a narrowing function whose floor equals the
// static floor does not narrow, and the error gives no reason; likewise a
// negative value's error names the default only where there is one. The
// messages are compared whole (TestConfigBounds checks prefixes).
func TestConfigBoundsReasonOnlyWhenNarrowed(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		// Two largest messages of 8 datagrams: 16, the static floor.
		{"Window floor equal", Config{Window: 15, MaxMessage: 8 * 996},
			"reliable: Config.Window 15 is under the floor 16"},
		{"RecvWindow floor equal", Config{RecvWindow: 15, MaxMessage: 8 * 996},
			"reliable: Config.RecvWindow 15 is under the floor 16"},
		// HeartbeatInterval 1 ms: HeartbeatMax's floor, as its static one.
		{"HeartbeatMax floor equal", Config{HeartbeatInterval: ms, HeartbeatMax: 999 * time.Microsecond},
			"reliable: Config.HeartbeatMax 999µs is under the floor 1ms"},
		{"HeartbeatMax over, floor equal", Config{HeartbeatInterval: ms, HeartbeatMax: time.Hour},
			"reliable: Config.HeartbeatMax 1h0m0s is over the limit 1m0s"},
		// One datagram more: the narrowed floor, with its reason.
		{"Window floor narrowed", Config{Window: 17, MaxMessage: 9 * 996},
			"reliable: Config.Window 17 is under the floor 18 (two largest messages: MaxMessage 8964 is 9 datagrams at MTU 1024)"},
		// A negative value names the default a zero takes, and none
		// where the default is 0 (off).
		{"NAKDelay negative, no default", Config{NAKDelay: -1},
			"reliable: Config.NAKDelay -1ns is negative (0 takes the default)"},
		{"FlowControl negative, no default", Config{FlowControl: -1},
			"reliable: Config.FlowControl FlowControl(-1) is negative (0 takes the default)"},
		{"MaxSenders negative, its default", Config{MaxSenders: -1},
			"reliable: Config.MaxSenders -1 is negative (0 takes the default, 64)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			err := cfg.setDefaults(1024)
			require.Error(t, err)
			require.Equal(t, tc.want, err.Error())
		})
	}
}

// One sender's receive window may take 1 GiB exactly (slots of 4096
// bytes at MTU 4032: 2^18 of them); a slot more is refused.
func TestRecvWindowBytesEdge(t *testing.T) {
	cfg := Config{RecvWindow: 1 << 18, MaxSenders: 1}
	require.NoError(t, cfg.setDefaults(4032))
	cfg = Config{RecvWindow: 1<<18 + 1, MaxSenders: 1}
	require.ErrorContains(t, cfg.setDefaults(4032), "Config.RecvWindow 262145 takes 1073745920 bytes a sender")
}

// MaxSenders receive windows together may take 16 GiB exactly (16
// senders of 2^18 slots of 4096 bytes, 1 GiB each); a sender more is
// refused.
func TestRecvTotalBytesEdge(t *testing.T) {
	cfg := Config{RecvWindow: 1 << 18, MaxSenders: 16}
	require.NoError(t, cfg.setDefaults(4032))
	cfg = Config{RecvWindow: 1 << 18, MaxSenders: 17}
	require.ErrorContains(t, cfg.setDefaults(4032), "Config.RecvWindow 262144 for Config.MaxSenders 17 senders takes up to 18253611008 bytes")
}
