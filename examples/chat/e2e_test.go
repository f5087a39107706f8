package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/stretchr/testify/require"
)

// proc is the chat running as a process (this test binary re-executed
// with RDMANET_CHAT_MAIN=1), driven through pipes.
type proc struct {
	nick   string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *lines
	stderr bytes.Buffer
	exited chan error
}

func startProc(t *testing.T, nick string, args ...string) *proc {
	t.Helper()
	p := &proc{nick: nick, out: newLines(), exited: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0], append([]string{"-nick", nick, "-heartbeat", "200ms"}, args...)...)
	p.cmd.Env = append(os.Environ(), envChatMain+"=1")
	p.cmd.Stderr = &p.stderr
	var err error
	p.in, err = p.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	read := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.out.add(sc.Text())
		}
		close(read)
	}()
	go func() {
		<-read // all output read before Wait closes the pipe
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		p.exited <- nil
		if t.Failed() {
			all, _ := p.out.snapshot()
			t.Logf("%s's output:\n%s\nstderr:\n%s", nick, strings.Join(all, "\n"), p.stderr.String())
		}
	})
	p.out.waitFor(t, nick+" joined", func(s string) bool { return strings.HasPrefix(s, "* joined ") })
	return p
}

func (p *proc) say(t *testing.T, line string) {
	t.Helper()
	_, err := io.WriteString(p.in, line+"\n")
	require.NoError(t, err)
}

// wait waits for the process to exit and requires status 0.
func (p *proc) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		require.NoError(t, err, "%s: %s", p.nick, p.stderr.String())
	case <-time.After(testWait):
		t.Fatalf("%s did not exit", p.nick)
	}
}

// conversation: two chat processes meet, talk, see a loss, and leave,
// through their stdin and stdout only.
func conversation(t *testing.T, args ...string) {
	group := newGroup().IP.String()
	args = append([]string{"-group", group}, args...)
	alice := startProc(t, "alice", append(args, "-drop-every", "3")...)
	bob := startProc(t, "bob", args...)
	alice.out.waitLine(t, "* bob joined")
	bob.out.waitFor(t, "alice's presence", func(s string) bool { return s == "* alice is here" || s == "* alice joined" })

	bob.say(t, "hello alice")
	alice.out.waitLine(t, "<bob> hello alice")
	for _, s := range []string{"one", "two", "three (never sent)", "four"} {
		alice.say(t, s)
	}
	bob.out.waitLine(t, "<alice> two")
	bob.out.waitLine(t, "! 1 message from alice lost")
	bob.out.waitLine(t, "<alice> four")
	require.Zero(t, bob.out.count("<alice> three (never sent)"))

	bob.say(t, "/who")
	bob.out.waitLine(t, "* 2 in "+group+":")
	bob.out.waitFor(t, "alice in /who", func(s string) bool {
		return strings.HasPrefix(s, "*   alice: last seen ") && strings.HasSuffix(s, "3 received, 1 lost")
	})
	bob.say(t, "/stats")
	bob.out.waitLine(t, "* messages: sent 1, received 3, lost 1, duplicates 0, late 0")

	bob.say(t, "/quit")
	bob.wait(t)
	bob.out.waitLine(t, "* left "+group)
	alice.out.waitLine(t, "* bob left")
	alice.in.Close() // the end of input leaves too
	alice.wait(t)
	alice.out.waitLine(t, "* left "+group)
}

// TestEndToEndPipes runs the chat as two processes. Without an RDMA device
// it uses the software backend on loopback, inside a private network
// namespace when it can make one (unshare -n, lo up); in the rxe VM it
// uses rdma-core on the test device.
func TestEndToEndPipes(t *testing.T) {
	if testDevice != "" {
		conversation(t, "-backend", "rdma-core", "-bind", testAddr)
		return
	}
	if !testenv.IsNetnsChild(t) && testenv.CanUnshare() {
		// Again, in a network namespace of our own that sees only lo.
		testenv.RunInOwnNetns(t)
		return
	}
	conversation(t, "-backend", "software")
}

// TestEndToEndRDMACore runs two chat processes on rdma-core over the RDMA
// device the rxe VM provides (make test-rxe). A missing device fails.
func TestEndToEndRDMACore(t *testing.T) {
	if testDevice == "" || testAddr == "" {
		t.Skip("no RDMA device: run `make test-rxe`")
	}
	group := newGroup().IP.String()
	args := []string{"-backend", "rdma-core", "-bind", testAddr, "-group", group}
	alice := startProc(t, "alice", args...)
	bob := startProc(t, "bob", args...)
	for _, p := range []*proc{alice, bob} {
		p.out.waitFor(t, "rdma-core on "+testDevice, func(s string) bool {
			return strings.HasPrefix(s, fmt.Sprintf("* joined %s as %s: rdma-core backend, %s ", group, p.nick, testDevice))
		})
	}
	alice.out.waitLine(t, "* bob joined")
	bob.say(t, "across rxe")
	alice.out.waitLine(t, "<bob> across rxe")
	alice.say(t, "and back")
	bob.out.waitLine(t, "<alice> and back")
	bob.say(t, "/quit")
	bob.wait(t)
	alice.out.waitLine(t, "* bob left")
}
