// Package roce is the RoCEv2 wire format of UD SEND_ONLY datagrams, as
// pure functions over byte slices: BTH, DETH and ImmDt encode and decode
// (Header), the checks a datagram alone allows (Decode, with a DropReason
// for each failure), the IPv4 and UDP headers it travels in as a receiver
// fills its GRH area (FillGRH) or checks a whole packet (CheckIPv4), the
// ICRC (InfiniBand Architecture, Annex A17), and the cutting of a batch
// into UDP GSO runs (CutRuns). It opens no socket and keeps no state but
// caches: the software provider (internal/verbs/soft) sends and receives
// what it builds.
//
// # The ICRC
//
// The ICRC is CRC-32 over the masked IP and UDP headers and the datagram
// (icrc.go). Its CRC over a long payload is folded with AVX-512
// VPCLMULQDQ where the CPU has it (CRCUpdate, CRCCopy: crc.go,
// crc_amd64.s). FlowICRC starts the ICRC of a flow's next datagram from
// the remembered CRC state of its headers, adding the IP ID and PSN
// through tables.
//
// # The ICRC without the IP header
//
// The ICRC covers the IPv4 Identification and flags, which a UDP socket
// cannot see. A receiver solves for them: CRC is affine, so the 17
// unknown bits form a small linear system (SolveIPv4ID, SolveTab: solve.go).
// A corrupted datagram passes with probability 2^-15 instead of 2^-32.
package roce
