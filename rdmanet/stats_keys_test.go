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

// The keys of Stats.Dropped and Stats.SendFailed are API: every key a conn
// can report is one of the exported constants, and the providers use the
// same strings.
func TestStatsKeysAreTheExportedConstants(t *testing.T) {
	same := map[string]string{
		DropOverflow: verbs.DropOverflow, DropWCError: verbs.DropWCError,
		DropTruncated: verbs.DropTruncated, DropBadTVer: verbs.DropBadTVer,
		DropBadOpcode: verbs.DropBadOpcode, DropBadPKey: verbs.DropBadPKey,
		DropBadQKey: verbs.DropBadQKey, DropBadICRC: verbs.DropBadICRC,
		DropBadPad: verbs.DropBadPad, DropNotForUs: verbs.DropNotForUs,
		DropTooLong: verbs.DropTooLong, DropDeviceOverflow: verbs.DropDeviceOverflow,
	}
	for ours, theirs := range same {
		assert.Equal(t, theirs, ours)
	}
	connOnly := []string{DropQPReset} // counted by the conn itself, not a provider
	assert.Len(t, DropReasons, len(same)+len(connOnly))
	for _, k := range DropReasons {
		if !slices.Contains(connOnly, k) {
			assert.Contains(t, same, k)
		}
	}

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
