package reliable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Close of a conn that sent, with no receiver known, lingers four status
// intervals for one to speak up (Linger is longer), and no more: here
// 3 s, bounded at 3.6 s (five intervals would be 3.75 s).
func TestCloseLingersForUnknownReceivers(t *testing.T) {
	group := newGroup()
	const si = 750 * time.Millisecond
	c := listenT(t, group, Config{Linger: 30 * time.Second, StatusInterval: si})
	writeN(t, c, group, 0, 1, 64)
	start := time.Now()
	require.NoError(t, c.Close())
	took := time.Since(start)
	t.Logf("Close took %v", took)
	require.GreaterOrEqual(t, took, 4*si, "Close with no receiver known")
	require.Less(t, took, 4*si+600*time.Millisecond, "Close with no receiver known")
}
