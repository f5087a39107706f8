// Package reliable is reliable multicast over RDMA UD: a net.PacketConn on
// an *rdmanet.Conn (either backend) that delivers every message of every
// sender to every member exactly once and in that sender's order, up to
// 64 KiB a message, or says exactly what was lost.
//
// A UDP or rdmanet program switches by changing its constructor:
// ListenMulticast and ListenConfig have the shape of rdmanet's (and
// net.ListenMulticastUDP's), with the protocol's Config beside the
// rdmanet.ListenConfig of the conn underneath.
//
//	group := &net.UDPAddr{IP: net.IPv4(239, 1, 2, 3)}
//	c, err := reliable.ListenMulticast("rdma", nil, group) // nil: loopback
//	// or: lc := reliable.ListenConfig{Conn: rdmanet.ListenConfig{...}, Config: reliable.Config{...}}
//	//     c, err := lc.ListenMulticast(ctx, "rdma", ifi, group)
//	if err != nil { ... }
//	defer c.Close() // lingers until receivers have everything (bounded)
//	c.WriteTo(msg, group) // up to c.MaxMessage() bytes; nil names the group too
//	n, from, err := c.ReadFrom(buf)
//	var loss *reliable.LossError
//	if errors.As(err, &loss) { ... loss.Messages of from are gone; keep reading }
//
// # Delivery
//
// Each conn has a random 32-bit session; with its QP it names the conn as a
// sender. A sender numbers its datagrams (seq) and its messages (msg); a
// message longer than MTU()-28 bytes is cut into fragments, one datagram
// each, with consecutive seqs. A receiver keeps, per sender, a ring of
// RecvWindow datagrams and hands out a message when all its fragments are
// there and every message before it was handed out (or reported lost).
// Senders are ordered independently. A conn does not read its own
// messages. ReadBatch (and WriteBatch) move many messages a call, in the
// same order as one at a time; a loss report comes out of ReadBatch alone,
// as its error, at its place in the stream.
//
// # Reading
//
// A conn runs its protocol (data into the receive windows, NAKs and status
// into the sender) on whichever goroutine reads the rdmanet conn. While a
// ReadFrom or ReadBatch waits, that is the reader itself: a datagram wakes
// the goroutine that delivers it and nothing else, one wake-up per message
// as with a plain conn. While nobody reads, a receive loop does it, so
// that a conn that only writes still hears NAKs and status; the receive
// loop hands the rdmanet conn to a reader that waits (after the next
// datagram) and takes it back when the reader has stayed away for 200 µs,
// at the timer goroutine's next tick (within StatusInterval), or at Close.
// A program that reads only now and then has its repairs served up to that
// much later.
//
// A publisher that does not read the group listens send-only
// (ListenConfig{Conn: rdmanet.ListenConfig{SendOnly: true}}): it still hears NAKs and status,
// which come by unicast. A member conn also reads the group; on the
// software backend the kernel loops its own multicast back to it, and a
// socket filter (the rdmanet conn's DisableLoopback, which this package
// always sets) drops those copies in the kernel, so reading for NAKs
// does not wake it for each datagram it sent.
//
// # Repair
//
// A receiver finds a gap when a datagram arrives past one it lacks, or
// when the sender's heartbeat (sent after HeartbeatInterval idle, doubling
// to HeartbeatMax) announces more than it has: tail loss. It waits a
// random back-off and then sends the sender a NAK by unicast UD for each
// missing run (at most 8 a round). The sender resends those datagrams
// from its window of Window datagrams, to the group by default
// (UnicastRepair: to the receiver that asked).
//
// Receivers do not hear each other's NAKs, so the sender's multicast
// repair is what suppresses them (as PGM's NAK confirmation): it reaches
// every receiver that missed the same datagrams and ends their rounds,
// NAKed or not (Stats.NAKsSent counts what was sent). For that the first
// NAK of a loss must go out about a round trip before the rest, whatever
// the group's size: the back-off is a truncated exponential (RFC 5401
// section 5; Nonnenmacher and Biersack 1999), a delay t on [0, T] with
// density e^(λt/T), λ = ln N + 1, T = 3 · (ln N + 1) · the smoothed round trip
// (at most 1 s; NAKDelay, when set, is T). N is the group size the
// sender advertises in every data datagram and heartbeat: it counts the
// receivers whose status it hears and sends ceil(log2 N) in 4 bits. A
// lone receiver (N = 1) NAKs at once. A round covers the gaps known when
// it started; when they are filled, gaps seen meanwhile start the next
// round, its back-off counted from the repair that ended the last one
// (which every receiver hears at about the same time).
//
// The sender suppresses too. NAKs sent before the repair could arrive
// still reach it, and so do retries sent by a
// receiver whose round-trip estimate is shorter than the path's (one not
// yet measured, or a sender behind its receive queue): none of them is
// answered again. Every datagram a sender sends to the group (data,
// repairs, heartbeats) carries its transmission number, one more each
// time, and a NAK carries the last one its receiver heard from that
// sender. A repair went out before every later transmission, on the same
// path: a NAK echoing a number before the repair's was sent before the
// repair could arrive, and is not answered (Stats.RepairsSuppressed); one
// echoing the repair's number or later comes from a receiver that lost
// the repair, and is. An idle sender sends a heartbeat soon after a
// repair, so that a receiver that lost it hears a later number. Once a
// repair is 32768 transmissions old, a NAK is answered whatever it
// echoes; within RepairLinger of a repair, none is. (UnicastRepair: a repair
// serves only the receiver that asked, and NAKs for it are held for two
// of the asking receiver's round trips, carried in the NAK, at least
// RepairLinger.) Each datagram lost once is so repaired once, and a
// repair lost is repaired again once.
//
// What a NAK can make a sender send is bounded, whatever it asks or
// echoes, three ways. A NAK pays for its repairs, as QUIC bounds what a
// server sends to an address it has not validated: a receiver pads its
// NAK to an eighth of the bytes it asks for (an MTU for each datagram,
// at most eight datagrams a NAK), and the sender answers a NAK with at
// most eight times its length in repairs. The sender resends a datagram
// at most once per RepairInterval. And repairs spend a credit that first
// sends earn (RepairShare of their bytes, 0.5 by default, up to a burst
// of 256 KiB that also refills over a second). A repair not covered is
// not sent (Stats.RepairsRateLimited), and its receiver asks again.
// Repairs so cost at most eight times the bytes of the NAKs that caused
// them, at any pace: measured with 1000 spoofed NAKs, each an MTU (the
// most a NAK can buy), for the whole window against a sender writing
// 512 B messages at 10,000 a second (TestHostile, software backend, MTU
// 4096), repairs came to 0.1x the NAKs' bytes in a burst and 0.5-0.8x
// paced over a second, with no write rate below the run without attack
// beyond the machine's noise; without the bound they come to 35-7,900x.
// Without a key (see Authentication) nothing tells a receiver's NAK from
// a forged one.
//
// A round asks only for its own gaps, its retries too. A NAK not answered
// is sent again after the larger of twice the round trip and the round
// trip plus four mean deviations (RFC 6298), plus a fresh back-off draw,
// doubling each time, up to 10 ms (or, on a slower path, that first delay,
// at most 1 s); a retry when the receiver has heard nothing from the
// sender since its last NAK (the sender would take it for one sent before
// its repair could arrive) waits until 10 ms (or four round trips) after
// that NAK, which it replaces only if it was lost. A first NAK found due
// more than T late (its process stalled, and every receiver in it finds
// its timer due at once) draws its back-off again, once a round. A NAK due
// while the conn has received datagrams it has not read yet waits until
// they are read (Stats.NAKsHeld), up to T (at least 10 ms) past its due
// time: the repair another receiver's NAK brought, or a retry's repair,
// may be among them, and a receiver that has fallen behind its own input
// would otherwise ask for what is already queued for it (a lone receiver's
// first NAK, with no back-off, does not wait). The conn can tell on the
// software backend (its sockets' queues) and, on rdma-core, while no read
// holds the CQ; otherwise the NAK goes as before. The round trip is
// measured from a round's NAK to the repair of the first datagram it asked
// for, in rounds that sent their NAK once (Karn's rule: a retry carries a
// back-off of up to T, itself a multiple of the round trip, and the
// estimate fed on itself) (Stats.RTT); until a receiver has measured one,
// it takes the shortest time a round took to fill without its own NAK
// (someone else's back-off plus round trip), or InitialRTT when longer: a
// receiver started below the path's round trip would otherwise NAK early
// at every loss. Stats.RepairDelay and RepairDelayMax say how long rounds
// took, from the first gap seen to the last filled, on the receiver's
// clock: they include how long the receiver took to read the repair.
//
// The decisions are pure functions of a clock reading and a random draw
// (feedback.go), and TestFeedbackSimulation drives them on a virtual
// clock: 1% loss, one-way delays log-normal around 100 µs, lost NAKs and
// repairs, round trips learnt from InitialRTT.
//
//	receivers  loss         NAKs/loss  repairs/loss  repair time p50/p99 (RTTs)
//	1          correlated   1.02       1.01          1.0 / 21
//	4          correlated   1.50       1.01          2.4 / 8.0
//	16         correlated   1.71       1.01          2.5 / 9.7
//	64         correlated   1.69       1.01          2.5 / 12
//	1,000      correlated   1.50       1.01          4.6 / 17
//	10,000     correlated   1.45       1.00          6.5 / 26
//	64         independent  1.05       1.01          13 / 41
//	10,000     independent  1.90       1.55          17 / 60
//	10,000     independent  2.34       1.57          9.0 / 33  (a path twice as slow)
//	10,000     independent  4.08       1.62          5.0 / 18  (InitialRTT a quarter of the path's)
//	10,000     independent  1.94       1.66          7.2 / 32  (the same, after 500 rounds)
//
// (Independent loss pays for the group-size scaling in time: a datagram
// one receiver lost waits out a back-off sized for all. At 1% independent
// loss a receiver takes part in one round in a hundred, so for the first
// hundred or so rounds most receivers back off from InitialRTT: the
// default, 200 µs, is meant to be at least half the fabric's round trip.
// One a quarter of it costs about 4 NAKs per loss over those first rounds;
// on a fabric slower than 400 µs, set InitialRTT to its round trip.) Measured on the
// software backend in one process on two cores, 1% nftables loss, 1 to
// 64 receivers (TestFeedbackScale, the table and its command in
// docs/benchmarks.md): NAKs per lost datagram 1.0-1.1 / 1.1-1.6 /
// 1.1-1.6 / 1.2-1.9 at 1 / 4 / 16 / 64 receivers on a quiet machine,
// repairs 1.00-1.05, and the median time from loss to repair, at 1,000
// messages a second, 2.6-4.5 round trips at 4 receivers and 3.6-6.9 at
// 64 (0.95-2.4x). In milliseconds it grows more (0.3-0.7 ms at 4,
// 3.4-5.8 ms at 64): every multicast wakes all 64 readers on the same
// two cores, so the round trip itself grows 7-10x, as it would not with
// one receiver a host. With the two cores
// overloaded by other work (load 4-5), 64 receivers sent 1.6-2.3 NAKs a
// loss: a starved process finds its timers due in bursts, before the
// repair that would cancel them is sent (the sender starves too) or
// read.
//
// Runtime timers sleep about a millisecond at least when the process is
// idle, so on Linux, while a NAK is pending, delays under 500 µs are slept
// on a timerfd in the runtime's netpoller: the sleep ends within the
// thread's wake-up (a timerfd has no timer slack) and the goroutine parks
// meanwhile, leaving its processor to the readers. The heartbeat has a
// timer of its own, which, when it fires after a write, sets itself again
// an interval after that write: a sender that writes does not wake its
// timer loop each HeartbeatInterval.
//
// The window is registered memory: an rdmanet.SendBuffer of the
// underlying conn, Window datagrams of MTU() bytes, each slot a whole
// datagram (header and payload) as sent. First sends and repairs are
// posted from their slot by its memory region, with no copy (the conn
// counts them in rdmanet.Stats.SentRegistered); a repair sets the repair
// flag and a new transmission number in the slot's header in place. The
// device reads a slot after the post returned, so the sender writes a
// slot only once its last send completed (rdmanet's SendsDone): a write
// that would overwrite a slot still being sent waits for it
// (Stats.WindowWaits, bounded by the write deadline), and a NAK for one
// is left for the receiver to repeat (Stats.RepairsDeferred). On the
// software backend a send completes inside its post, so neither happens.
// Registered memory is pinned on rdma-core (Window slots of MTU + 64
// bytes, 4.25 MiB by default at MTU 1024): where registering it fails (RLIMIT_MEMLOCK for a
// process without CAP_IPC_LOCK, or the device's limit of memory regions)
// the window is Go memory and each send is copied, as WindowRegistered
// reports.
//
// A write that fails says exactly what it wrote. A message is written
// once any of its datagrams was posted: the receivers know of it and get
// the rest by repair. When the underlying conn fails part way through a
// post (the write deadline passing while the send queue is full, the
// link going down), the messages none of whose datagrams went out are
// taken back out of the window, their sequence numbers given to the next
// messages, and left out of the count, so writing them again delivers
// each once.
//
// # Loss
//
// When a NAK asks for datagrams that have left the sender's window, or a
// heartbeat says the window starts past what a receiver has, the receiver
// gives up on them: the next ReadFrom at that place in the sender's
// stream returns n = 0, the sender, and a *net.OpError wrapping a
// *LossError that says how many messages were lost; the one after goes on
// reading. Stats.LossesReported and MessagesLost count them. Messages
// received whole behind a lost one are delivered after the report.
//
// # Flow control
//
// FlowMax (the default): a sender never waits; a receiver that falls more
// than a window behind is told what it lost. FlowMin: a write waits,
// bounded by the write deadline, while it would overwrite a datagram that
// the slowest live receiver (one whose status was heard within
// ReceiverTimeout) does not have or has no room for. Receivers report
// their position and room to a FlowMin sender whenever either moved on
// by a quarter of RecvWindow, every ReceiverTimeout/4, and in answer to
// the heartbeats it sends while a write waits (at most once a
// StatusInterval); to a FlowMax sender when they first hear it, when
// its Close asks, and once a ReceiverTimeout. A receiver a sender knows
// stays known by its own heartbeats, so members that do not write cost
// each other a heartbeat each HeartbeatMax, not a report each.
//
// # Membership
//
// A conn heartbeats from Listen on, whatever its flow control, before
// its first write too (idle, the interval doubles up to HeartbeatMax):
// receivers in the group learn of it, start it at seq 0 and report their
// status, so Receivers counts them before the first write and the loss
// of the first datagram is a gap repaired like any other. A receiver
// starts a sender it has not heard before at the message of the first
// datagram it hears (FromWindowStart: at the oldest message the sender
// still holds): one that joins after the sender's first write starts
// where it joins (late join). In the sender's start, its first second
// while it has sent less than a window, its data and heartbeats say so
// (a repair only while the start lasts),
// and a receiver that first hears it then starts it at its first
// message: one listening from before the sender started, whose first
// heartbeat from it was overtaken by data (a write at once after
// Listen) or lost with the first datagrams, has them repaired rather
// than skipped, and one that joins in that second gets what the sender
// wrote before it. It forgets a sender silent for
// SenderTimeout. Every member conn is so a sender to the others, heard
// by its heartbeats, whether it writes or not.
//
// A receiver tracks at most MaxSenders senders. With that many, a new one is
// admitted by evicting the idle sender heard least recently (nothing
// unread, no gap, no NAK pending; Stats.SendersEvicted), which, heard
// again, resumes where it was. When none is idle, the new sender's
// datagrams are dropped (Stats.SendersRefused) and its first one
// remembered; once admitted it starts there, so what it sent meanwhile
// is repaired or, where it left the sender's window, reported lost: not
// skipped. A sender forgotten after SenderTimeout (silent, not closed)
// is remembered as an evicted one: heard again, it resumes where it
// was. These memories are bounded (4 MaxSenders senders, at least 64):
// senders only ever refused are forgotten first, then the least recently
// touched. A flood of forged sessions that are admitted and evicted in
// turn can still push out a real sender's place; each place forgotten is
// counted (Stats.SendersForgotten), since what that sender sent while not
// tracked is then neither delivered nor reported. A keyed group
// (Config.Key) keeps forgers out.
//
// What no sender sends is dropped and counted, never taken: a message
// number that grows faster than the seq (every message takes a datagram
// at least) or a fragment of a message that starts before the next one
// to read (Stats.Implausible), a message with more fragments than this
// receiver's MaxMessage allows (Stats.TooLong: not reassembled, and
// reported lost at its place, with no NAK for it and no stall of what
// follows), a "lost" answer from a sender not tracked or while no NAK to
// it is outstanding (Stats.Unsolicited). A "lost" answer condemns only
// gaps below what the receiver knows the sender sent. Counts of messages
// lost saturate at the largest uint64 rather than wrap.
// Close stops writes, sends heartbeats marked fin (receivers answer with
// their status at once) and keeps repairing until every live receiver
// holds everything or Linger has passed, then closes the rdmanet conn. A
// receiver the sender never heard from (its first status not yet
// arrived) cannot be waited for: with none known, Close lingers four
// status intervals (at least 5 ms) for one to speak up.
//
// # Authentication
//
// Without a key, a group is open: anyone who can send UDP to port 4791 on
// the fabric, member or not, can forge any datagram from any QP (RoCE's
// ICRC is a CRC, not a signature). Repairs are bounded whatever NAKs ask
// (see Repair), but nothing else can be: a forged status (position 0,
// no room) stalls a FlowMin sender for as long as it is refreshed within
// ReceiverTimeout, forged data from a sender's address replaces its
// messages or reports a million of them lost, a forged "lost" gives up
// every gap a receiver finds, and forged senders fill MaxSenders
// (TestHostile measures each).
//
// Config.Key (16 to 64 bytes, the same at every member) authenticates the
// group. Every datagram of every kind a keyed conn sends carries flag 0x8
// and a 24-byte trailer: its transmit counter (8 bytes, one more for each
// datagram the conn sends, to the group or to one receiver; a repair is
// stamped anew) and an HMAC-SHA-256 tag truncated to 16 bytes over the
// header, the payload, the counter and the sending QP's number. A keyed
// conn checks the tag of each datagram before it looks at anything in
// it, and keeps an anti-replay window (as IPsec's, 1984 counters) per
// sending QP and session: a datagram with a wrong or missing tag
// (Stats.Unauthenticated), or whose counter it has seen or that is older
// than the window (Stats.Replayed), is dropped. Such a datagram is never
// delivered or answered and moves no state: no peer is created, no
// timer armed, no window moved. A message gets MTU()-52 bytes a datagram
// instead of MTU()-28. An open conn drops a keyed datagram as malformed
// (it does not know flag 0x8); conns with different keys do not hear each
// other.
//
// What a key does not do: it hides nothing (who is on the group, and the
// payload, travel in the clear: it authenticates, it does not encrypt);
// every key holder can still misbehave in every way an open group allows
// (forged status, NAK streams within the repair bound, data under its own
// sessions), since the key is the group's, not a member's; keys are
// distributed and changed by the user (a conn's key is fixed at Listen);
// the tag covers the sender's QP number, not its GID, so a datagram
// forwarded by someone who sees it first, from another address with the
// same QP number, is taken as coming from there; and a receiver
// remembers a (QP, session) for twice the larger of SenderTimeout and
// ReceiverTimeout after it last heard it (at most 4×MaxSenders+64 of
// them): a recording of a session it has forgotten replays as a new
// sender.
//
// # Wire format
//
// Every datagram starts with a 28-byte header, big-endian:
//
//	byte  0     version (high nibble, 1) | kind (low nibble)
//	byte  1     flags: 0x1 repair (data) or a write waits for status
//	            (heartbeat), 0x2 sender runs FlowMin, 0x4 fin
//	            (heartbeat) or the sender's start (data: Membership),
//	            0x8 keyed (the 24-byte trailer of Authentication follows
//	            the payload); bits 4-7 (data, heartbeat): the sender's
//	            group size, ceil(log2 receivers), 0 for one or none (zero
//	            otherwise)
//	bytes 2-3   fragment index (data); heartbeat: 1 in the sender's
//	            start, else 0; 0 otherwise
//	bytes 4-5   fragment count (data, >= 1; 0 otherwise)
//	bytes 6-7   data, heartbeat: the sender's transmission number (one
//	            more for each datagram it sends to the group, repairs
//	            included; mod 65536); NAK: the last one the receiver heard
//	            from the sender it asks; zero otherwise
//	bytes 8-11  session of the endpoint that sent this datagram
//	bytes 12-19 seq
//	bytes 20-27 msg
//
// Kinds, the meaning of seq and msg, and the payload after the header:
//
//	1 data       seq of this datagram, msg of its message; payload: the fragment
//	2 heartbeat  next seq and msg the sender will use;
//	             payload: 8 bytes first seq in the window that starts a
//	             message, 8 bytes that message's msg (multicast)
//	3 NAK        first missing seq; payload: 4 bytes the sender's
//	             session, 4 bytes how many datagrams, 4 bytes the
//	             receiver's smoothed RTT in ns; then zero padding to
//	             an eighth of the repairs asked for, one MTU each
//	             (unicast to the sender)
//	4 status     first seq the receiver is missing; payload: 4 bytes the
//	             sender's session, 8 bytes one past the last seq it has
//	             room for (unicast to the sender)
//	5 lost       where the window starts (seq, msg) as in a heartbeat; no
//	             payload (unicast to the receiver whose NAK it answers)
//
// A data datagram's fragment index is below its count, and its seq minus
// the index is the seq of the message's first fragment. Control kinds
// carry exactly their payload. Anything else (short, unknown version, kind
// or flags, reserved bytes set, bad fragment fields, wrong length) is
// dropped and counted in Stats.Malformed; FuzzDecode fuzzes the decoder.
//
// # Memory
//
// A sender holds Window datagrams of MTU() bytes. A receiver's window for
// a sender grows with what it must keep: a sender heard but whose data
// need not be kept (read at once, straight into the reader's buffer)
// costs a few hundred bytes; the first datagram kept makes a ring of 8
// slots, which doubles, the datagrams held moved to their new slots, as
// datagrams further ahead of the reader arrive, up to RecvWindow. A
// window empty and unused for SenderTimeout is freed. A slot is MTU()
// rounded up to a cache line plus one (4160 bytes at MTU 4096), so the
// bound is RecvWindow slots per sender, for at most MaxSenders senders
// (Stats.RecvWindowBytes says what they take now); 64 members that all
// hear each other, one of them writing, take tens of MB, not 64 x 63
// full windows. Nothing is allocated per message on the write and read
// paths at steady state (a window grows once to what the stream needs);
// a loss report allocates its *LossError.
package reliable
