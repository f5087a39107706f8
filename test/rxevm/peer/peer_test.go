package peer

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// newPair serves an agent on loopback and returns a client for it.
func newPair(t *testing.T) (*Agent, *Client) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := NewAgent()
	srv := &http.Server{Handler: a.Handler()}
	go srv.Serve(ln)
	t.Cleanup(func() { a.StopAll(); srv.Close() })
	c, err := Dial(ln.Addr().String(), 5*time.Second)
	require.NoError(t, err)
	return a, c
}

func TestRunReturnsOutputAndCode(t *testing.T) {
	_, c := newPair(t)
	r, err := c.Run("x", 10*time.Second, "sh", "-c", "echo out; echo err >&2; exit 3")
	require.NoError(t, err)
	require.True(t, r.Exited)
	require.Equal(t, 3, r.Code)
	require.Equal(t, "out\nerr\n", r.Output)
	require.Equal(t, []string{"err"}, r.Lines("er"))
}

func TestWaitUntilFeedAndStop(t *testing.T) {
	_, c := newPair(t)
	_, err := c.Start(StartRequest{Name: "cat", Argv: []string{"sh", "-c", "echo READY; cat"}, Stdin: true})
	require.NoError(t, err)
	r, err := c.Wait("cat", "READY", 10*time.Second)
	require.NoError(t, err)
	require.True(t, r.Matched, r.Output)
	require.False(t, r.Exited)

	_, err = c.Start(StartRequest{Name: "cat", Argv: []string{"true"}})
	require.ErrorContains(t, err, "still running")

	require.NoError(t, c.Feed("cat", "hello\n", false))
	r, err = c.Wait("cat", "hello", 10*time.Second)
	require.NoError(t, err)
	require.True(t, r.Matched, r.Output)

	r, err = c.Wait("cat", "never printed", 100*time.Millisecond)
	require.NoError(t, err)
	require.False(t, r.Matched)
	require.False(t, r.Exited)

	r, err = c.Stop("cat")
	require.NoError(t, err)
	require.True(t, r.Exited, "stopped: %+v", r)
	require.Equal(t, "READY\nhello\n", r.Output)
}

func TestStartFailsCleanly(t *testing.T) {
	_, c := newPair(t)
	_, err := c.Start(StartRequest{Name: "nope", Argv: []string{"/nonexistent/binary"}})
	require.ErrorContains(t, err, "nonexistent")
	_, err = c.Wait("unknown", "", time.Second)
	require.ErrorContains(t, err, `no command named "unknown"`)
	_, err = c.Run("late", 200*time.Millisecond, "sleep", "10")
	require.ErrorContains(t, err, "did not exit")
}

func TestRunTimesOutAndStops(t *testing.T) {
	a, c := newPair(t)
	_, err := c.Run("sleep", 100*time.Millisecond, "sleep", "30")
	require.Error(t, err)
	p, err := a.get("sleep")
	require.NoError(t, err)
	select {
	case <-p.done:
	default:
		t.Fatal("Run's timeout left the command running")
	}
}

func TestQuit(t *testing.T) {
	a, c := newPair(t)
	require.NoError(t, c.Quit())
	select {
	case <-a.Quit():
	case <-time.After(5 * time.Second):
		t.Fatal("Quit not seen")
	}
	require.NoError(t, c.Quit(), "a second quit")
}

func TestDialTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	_, err = Dial(addr, 300*time.Millisecond)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), addr), err.Error())
}
