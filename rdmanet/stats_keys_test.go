//go:build linux

package rdmanet

import (
	"slices"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// The keys of Stats.Dropped and Stats.SendFailed are API: each list names
// every key once, and each errno maps to one send error reason. (The Drop*
// constants are the providers' own, so they cannot drift apart.)
func TestStatsKeysAreTheExportedConstants(t *testing.T) {
	assert.Len(t, DropReasons, 13)
	for i, k := range DropReasons {
		assert.NotContains(t, DropReasons[i+1:], k, "DropReasons lists %q twice", k)
	}
	assert.NotContains(t, DropReasons, verbs.DropOwnLoopback, "own loopback is Stats.Loopback, not a drop")

	// Send errors: each errno maps to one of SendErrorReasons.
	assert.Len(t, SendErrorReasons, int(numSendReasons))
	for _, e := range []syscall.Errno{0, syscall.EMSGSIZE, syscall.ENETUNREACH, syscall.EHOSTUNREACH,
		syscall.EPERM, syscall.EACCES, syscall.ENOBUFS, syscall.EIO, syscall.EINVAL} {
		r := sendReasonOf(e)
		require.Less(t, int(r), len(SendErrorReasons), "%v", e)
	}
	assert.Equal(t, SendErrMessageTooLong, SendErrorReasons[sendReasonOf(syscall.EMSGSIZE)])
	assert.Equal(t, SendErrNetUnreachable, SendErrorReasons[sendReasonOf(syscall.ENETUNREACH)])
	assert.Equal(t, SendErrHostUnreachable, SendErrorReasons[sendReasonOf(syscall.EHOSTUNREACH)])
	assert.Equal(t, SendErrHostUnreachable, SendErrorReasons[sendReasonOf(syscall.ETIMEDOUT)])
	assert.Equal(t, SendErrNotPermitted, SendErrorReasons[sendReasonOf(syscall.EPERM)])
	assert.Equal(t, SendErrNoBuffers, SendErrorReasons[sendReasonOf(syscall.ENOBUFS)])
	assert.Equal(t, SendErrCompletion, SendErrorReasons[sendReasonOf(0)])
	assert.Equal(t, SendErrOther, SendErrorReasons[sendReasonOf(syscall.EIO)])
	assert.False(t, slices.ContainsFunc(DropReasons, func(k string) bool { return slices.Contains(SendErrorReasons, k) }),
		"drop and send error reasons are distinct")
}
