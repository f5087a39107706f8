package main

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestEditorLineEditing(t *testing.T) {
	in := "hex\x7flo\x1b[Dxx\x7f\x7f world\r" + // backspace, an arrow key ignored
		"junk\x15again\n" + // Ctrl-U clears
		"\x1bOPé\r" + // F1 (ESC O P) ignored, UTF-8 kept
		"\x04" // Ctrl-D on an empty line
	d := newEditor(strings.NewReader(in), io.Discard)
	for _, want := range []string{"helo world", "again", "é"} {
		got, err := d.ReadLine()
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err := d.ReadLine()
	assert.ErrorIs(t, err, errQuit)
}

func TestEditorRedrawsAfterIncomingLine(t *testing.T) {
	pr, pw := io.Pipe()
	var out lockedBuffer
	d := newEditor(pr, &out)
	got := make(chan string)
	go func() {
		l, _ := d.ReadLine()
		got <- l
	}()
	pw.Write([]byte("hal"))
	// Wait until the editor has the 3 runes, then a line arrives.
	require.Eventually(t, func() bool { return strings.HasSuffix(out.String(), "> hal") }, testWait, tick)
	d.Println("<bob> hi")
	// The partial input is erased, the line printed, input redrawn.
	assert.True(t, strings.HasSuffix(out.String(), "\r\033[K<bob> hi\r\n\r\033[K> hal"), "%q", out.String())
	pw.Write([]byte("f\r"))
	assert.Equal(t, "half", <-got)
	pw.Close()
}

func TestEditorShowsTheTailOfLongInput(t *testing.T) {
	var out lockedBuffer
	d := newEditor(strings.NewReader(strings.Repeat("a", 100)+"XYZ\r"), &out)
	d.width = func() int { return 20 }
	l, err := d.ReadLine()
	require.NoError(t, err)
	assert.Len(t, l, 103)
	assert.Contains(t, out.String(), "\r\033[K> "+strings.Repeat("a", 14)+"XYZ")
	assert.NotContains(t, out.String(), strings.Repeat("a", 18))
}

func TestPipeDisplay(t *testing.T) {
	var out bytes.Buffer
	p := newPipe(strings.NewReader("one\r\ntwo\n"), &out)
	for _, want := range []string{"one", "two"} {
		l, err := p.ReadLine()
		require.NoError(t, err)
		assert.Equal(t, want, l)
	}
	_, err := p.ReadLine()
	assert.ErrorIs(t, err, io.EOF)
	p.Println("* x")
	assert.Equal(t, "* x\n", out.String())
	assert.False(t, p.Echo())
}

func TestNewDisplayInPipeIsPlain(t *testing.T) {
	r, w, err := osPipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	d, err := NewDisplay(r, w)
	require.NoError(t, err)
	assert.IsType(t, &pipeDisplay{}, d)
	assert.False(t, isTerminal(int(r.Fd())))
}
