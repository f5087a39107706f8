package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// meet starts alice, then bob, and waits until each knows the other.
func meet(t *testing.T, g func() (*client, *client)) (*client, *client) {
	t.Helper()
	alice, bob := g()
	alice.out.waitLine(t, "* bob joined")
	// alice answers bob's hello at once (or bob heard her own hello).
	bob.out.waitFor(t, "alice's presence", func(s string) bool { return s == "* alice is here" || s == "* alice joined" })
	return alice, bob
}

func pair(t *testing.T, aliceMods ...func(*Options)) (*client, *client) {
	group := newGroup()
	return meet(t, func() (*client, *client) {
		return startClient(t, "alice", group, aliceMods...), startClient(t, "bob", group)
	})
}

func TestTwoClientsExchangeMessages(t *testing.T) {
	t.Parallel()
	alice, bob := pair(t)
	bob.say(t, "hello alice")
	alice.out.waitLine(t, "<bob> hello alice")
	alice.say(t, "hi bob, ça va?")
	bob.out.waitLine(t, "<alice> hi bob, ça va?")
	// A line that starts with / is sent with //.
	alice.say(t, "//who is there")
	bob.out.waitLine(t, "<alice> /who is there")
	// Neither sees its own lines in a pipe: loopback is off.
	assert.Zero(t, alice.out.count("<alice> hi bob, ça va?"))

	bob.say(t, "/quit")
	alice.out.waitLine(t, "* bob left")
	select {
	case err := <-bob.done:
		require.NoError(t, err)
		bob.done <- nil
	case <-time.After(testWait):
		t.Fatal("bob did not quit")
	}
	bob.out.waitFor(t, "* left", func(s string) bool { return strings.HasPrefix(s, "* left ") })
	assert.Empty(t, alice.Chat.roster.Present())
}

func TestRostersConverge(t *testing.T) {
	t.Parallel()
	group := newGroup()
	all := []string{"alice", "bob", "carol"}
	var cs []*client
	for _, n := range all {
		cs = append(cs, startClient(t, n, group))
	}
	for _, c := range cs {
		var others []string
		for _, n := range all {
			if n != c.nick {
				others = append(others, n)
			}
		}
		require.Eventually(t, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return assert.ObjectsAreEqual(others, nicks(c.roster.Present()))
		}, testWait, tick, "%s's roster", c.nick)
		c.say(t, "/who")
		c.out.waitLine(t, "* 3 in "+group.IP.String()+":")
		c.out.waitLine(t, "*   "+c.nick+" (you)")
		for _, o := range others {
			c.out.waitFor(t, o+" in /who", func(s string) bool {
				return strings.HasPrefix(s, "*   "+o+": last seen ") && strings.HasSuffix(s, " ago, 0 received, 0 lost")
			})
		}
	}
}

func TestInjectedDropIsReportedAsLoss(t *testing.T) {
	t.Parallel()
	alice, bob := pair(t, func(o *Options) { o.DropEvery = 2 })
	for _, s := range []string{"one", "two", "three"} {
		alice.say(t, s)
	}
	i1 := bob.out.waitLine(t, "<alice> one")
	loss := bob.out.waitLine(t, "! 1 message from alice lost")
	i3 := bob.out.waitLine(t, "<alice> three")
	assert.True(t, i1 < loss && loss < i3, "the loss shows when msg 3 arrives: lines %d %d %d", i1, loss, i3)
	assert.Zero(t, bob.out.count("<alice> two"))

	// A loss at the end shows at the next heartbeat.
	alice.say(t, "four")
	require.Eventually(t, func() bool { return bob.out.count("! 1 message from alice lost") == 2 }, testWait, tick)
	assert.Equal(t, Counts{Received: 2, Lost: 2}, bob.Counts())
	assert.Equal(t, Counts{Sent: 2, Injected: 2}, alice.Counts())

	bob.say(t, "/stats")
	bob.out.waitLine(t, "* messages: sent 0, received 2, lost 2, duplicates 0, late 0")
	alice.say(t, "/stats")
	alice.out.waitLine(t, "* not sent: 2 dropped on purpose (-drop-every 2)")
}

func TestDuplicatesAreSuppressed(t *testing.T) {
	t.Parallel()
	group := newGroup()
	bob := startClient(t, "bob", group)
	// A raw conn plays a member whose datagrams arrive twice.
	lc := testListenConfig()
	raw, err := lc.ListenMulticast(context.Background(), "rdma", nil, group)
	require.NoError(t, err)
	defer raw.Close()
	send := func(p Packet) {
		b, err := p.Append(nil)
		require.NoError(t, err)
		_, err = raw.WriteTo(b, group)
		require.NoError(t, err)
	}
	p := Packet{Type: Msg, Session: 77, Seq: 1, Interval: 100, Nick: "dup", Text: "twice"}
	send(p)
	send(p)
	p.Seq, p.Text = 2, "once"
	send(p)
	bob.out.waitLine(t, "<dup> once")
	assert.Equal(t, 1, bob.out.count("<dup> twice"))
	assert.Equal(t, Counts{Received: 2, Dups: 1}, bob.Counts())

	// A datagram of another protocol version is ignored, with a note.
	b, _ := (&Packet{Type: Msg, Session: 77, Seq: 3, Nick: "dup", Text: "v2"}).Append(nil)
	b[2] = 2
	_, err = raw.WriteTo(b, group)
	require.NoError(t, err)
	bob.out.waitFor(t, "a version note", func(s string) bool {
		return strings.HasPrefix(s, "! ignoring datagrams from ") && strings.HasSuffix(s, "unsupported protocol version 2 (this chat speaks 1)")
	})
	assert.Zero(t, bob.out.count("<dup> v2"))
}

func TestMemberTimesOut(t *testing.T) {
	t.Parallel()
	group := newGroup()
	alice := startClient(t, "alice", group)
	carol := startClient(t, "carol", group, func(o *Options) { o.noBye = true })
	alice.out.waitLine(t, "* carol joined")
	carol.stop(t) // vanishes without a bye, as a crash would
	alice.out.waitLine(t, "* carol timed out")
	assert.Zero(t, alice.out.count("* carol left"))
	alice.mu.Lock()
	assert.Empty(t, alice.roster.Present())
	alice.mu.Unlock()
}

func TestRestartUnderSameNick(t *testing.T) {
	t.Parallel()
	group := newGroup()
	alice := startClient(t, "alice", group)
	bob1 := startClient(t, "bob", group, func(o *Options) { o.noBye = true; o.Heartbeat = 5 * time.Second })
	alice.out.waitLine(t, "* bob joined")
	bob1.say(t, "first life")
	bob1.say(t, "still first")
	alice.out.waitLine(t, "<bob> still first")
	bob1.stop(t)
	bob2 := startClient(t, "bob", group)
	alice.out.waitLine(t, "* bob restarted")
	bob2.say(t, "second life") // msg 1 again: new session, not a duplicate
	alice.out.waitLine(t, "<bob> second life")
	assert.Zero(t, alice.out.count("* bob timed out"))
	assert.Zero(t, alice.Counts().Dups)
}

func TestLineLongerThanOneDatagramIsRefused(t *testing.T) {
	t.Parallel()
	alice, bob := pair(t)
	max := alice.MaxText()
	mtu := alice.conn.MTU()
	require.Equal(t, mtu-headerLen("alice"), max)
	alice.say(t, strings.Repeat("x", max+1))
	alice.out.waitLine(t, "! not sent: "+itoa(max+1)+" bytes of text, at most "+itoa(max)+
		" fit in one datagram (MTU "+itoa(mtu)+"); UD multicast does not split messages")
	alice.say(t, strings.Repeat("y", max))
	bob.out.waitLine(t, "<alice> "+strings.Repeat("y", max))
	assert.Zero(t, bob.out.count("<alice> "+strings.Repeat("x", max+1)))
	assert.Equal(t, Counts{Sent: 1, Refused: 1}, alice.Counts())
	alice.say(t, "/stats")
	alice.out.waitLine(t, "* not sent: 1 too long")
	assert.Equal(t, Counts{Received: 1}, bob.Counts(), "nothing lost: the long line was never numbered")
}

func TestLoopbackShowsOwnMessages(t *testing.T) {
	t.Parallel()
	group := newGroup()
	alice := startClient(t, "alice", group, func(o *Options) { o.Listen.DisableLoopback = false })
	alice.say(t, "echo")
	alice.out.waitLine(t, "<alice> echo")
	alice.mu.Lock()
	assert.Empty(t, alice.roster.All(), "a member is not in its own roster")
	alice.mu.Unlock()
}

func TestStatsAndHelp(t *testing.T) {
	t.Parallel()
	alice, bob := pair(t)
	alice.say(t, "m1")
	bob.out.waitLine(t, "<alice> m1")
	for _, c := range []*client{alice, bob} {
		c.say(t, "/stats")
		b := c.conn.Backend()
		c.out.waitFor(t, "the backend line", func(s string) bool {
			return strings.HasPrefix(s, "* backend "+b.Name+", device "+b.Device+" port ") &&
				strings.Contains(s, "MTU "+itoa(c.conn.MTU())+": lines up to "+itoa(c.MaxText())+" bytes")
		})
		c.out.waitFor(t, "datagram counts", func(s string) bool { return strings.HasPrefix(s, "* datagrams: sent ") })
	}
	alice.out.waitLine(t, "* messages: sent 1, received 0, lost 0, duplicates 0, late 0")
	bob.out.waitLine(t, "* messages: sent 0, received 1, lost 0, duplicates 0, late 0")
	alice.say(t, "/help")
	alice.out.waitFor(t, "help", func(s string) bool { return strings.HasPrefix(s, "* /who ") })
	alice.say(t, "/frobnicate now")
	alice.out.waitLine(t, "! unknown command /frobnicate: try /help")
}

func TestOpenFailsClearly(t *testing.T) {
	t.Parallel()
	_, err := Open(context.Background(), Options{Nick: "a b", Group: newGroup()}, newPipe(strings.NewReader(""), nil))
	require.ErrorContains(t, err, "spaces")
	_, err = Open(context.Background(), Options{Nick: "a", Group: newGroup(),
		Listen: rdmanet.ListenConfig{Backend: "carrier-pigeon"}}, newPipe(strings.NewReader(""), nil))
	require.ErrorContains(t, err, "unknown backend")
}

func itoa(n int) string { return strconv.Itoa(n) }
