package roce

// DropReason says why a received datagram is dropped. The functions of
// this package return the reasons the datagram itself shows (Truncated
// through NotForUs); DropTooLong and DropSelf are the receiver's, which a
// provider counts by the same index.
type DropReason uint8

// The drop reasons, Accepted first: NumDropReasons is how many there are.
const (
	Accepted      DropReason = iota
	DropTruncated            // shorter than its headers and ICRC
	DropBadTVer              // BTH TVer not 0
	DropBadOpcode            // not UD SEND_ONLY[/WITH_IMMEDIATE]
	DropBadPKey              // P_Key neither 0xFFFF nor 0x7FFF
	DropBadQKey              // DETH Q_Key not the QP's
	DropBadICRC              // ICRC does not match
	DropBadPad               // PadCnt longer than the payload
	DropNotForUs             // dest QPN not ours, or a group not joined
	DropTooLong              // does not fit the posted receive buffer
	DropSelf                 // own multicast looped back, blocked on request
	NumDropReasons
)

var dropNames = [NumDropReasons]string{
	Accepted:      "Accepted",
	DropTruncated: "DropTruncated",
	DropBadTVer:   "DropBadTVer",
	DropBadOpcode: "DropBadOpcode",
	DropBadPKey:   "DropBadPKey",
	DropBadQKey:   "DropBadQKey",
	DropBadICRC:   "DropBadICRC",
	DropBadPad:    "DropBadPad",
	DropNotForUs:  "DropNotForUs",
	DropTooLong:   "DropTooLong",
	DropSelf:      "DropSelf",
}

// String returns the reason's name in Go ("DropBadICRC"), for messages;
// the names a provider reports its counters under are verbs' Drop*
// constants.
func (r DropReason) String() string {
	if r < NumDropReasons {
		return dropNames[r]
	}
	return "unknown drop reason"
}
