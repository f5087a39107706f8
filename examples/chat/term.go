package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"
)

// Display is where a chat reads lines and shows events.
type Display interface {
	// Println shows one event line (without its newline). Safe for
	// concurrent use with ReadLine.
	Println(line string)
	// ReadLine returns the next line typed or piped in, without its
	// newline, or io.EOF at the end of input.
	ReadLine() (string, error)
	// Echo reports whether the user's own lines should be shown as
	// "<nick> text" (a terminal) or not (a pipe: the input is elsewhere).
	Echo() bool
	// Close gives the terminal back as it was.
	Close() error
}

// errQuit ends the input as /quit does (Ctrl-D on an empty line).
var errQuit = errors.New("quit")

// NewDisplay returns a terminal display when stdin and stdout are both
// terminals, else a pipe display.
func NewDisplay(stdin io.Reader, stdout io.Writer) (Display, error) {
	in, ok1 := stdin.(*os.File)
	out, ok2 := stdout.(*os.File)
	if ok1 && ok2 && isTerminal(int(in.Fd())) && isTerminal(int(out.Fd())) {
		return newTTY(in, out)
	}
	return newPipe(stdin, stdout), nil
}

// pipeDisplay: a line in, a line out, nothing else. Scripts and tests see
// exactly one line per event.
type pipeDisplay struct {
	sc  *bufio.Scanner
	mu  sync.Mutex
	out io.Writer
}

func newPipe(in io.Reader, out io.Writer) *pipeDisplay {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 4096), 1<<20) // longer lines than any MTU, to refuse them
	return &pipeDisplay{sc: sc, out: out}
}

func (p *pipeDisplay) Println(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	io.WriteString(p.out, line+"\n")
}

func (p *pipeDisplay) ReadLine() (string, error) {
	if p.sc.Scan() {
		return strings.TrimSuffix(p.sc.Text(), "\r"), nil
	}
	if err := p.sc.Err(); err != nil {
		return "", err
	}
	return "", io.EOF
}

func (p *pipeDisplay) Echo() bool   { return false }
func (p *pipeDisplay) Close() error { return nil }

// ttyDisplay edits the input line itself (the terminal's echo and line
// discipline are off) so that it can always redraw it: an incoming line
// goes out as "\r\033[K" (to the start of the line, erase it), the line,
// a newline, then the prompt and what was typed so far.
//
// Keys: Enter sends, Backspace deletes, Ctrl-U clears the line, Ctrl-D on
// an empty line quits, Ctrl-C (a signal: ISIG stays on) quits; arrow keys
// and other escape sequences are ignored. Long input scrolls
// horizontally: only its tail that fits the width is shown.
type ttyDisplay struct {
	in     *bufio.Reader
	out    io.Writer
	fd     int        // -1: not a terminal (tests)
	saved  *termios   // to restore
	width  func() int // terminal columns
	prompt string

	mu   sync.Mutex
	line []rune
}

// newEditor returns the line editor without touching any terminal.
func newEditor(in io.Reader, out io.Writer) *ttyDisplay {
	return &ttyDisplay{in: bufio.NewReader(in), out: out, fd: -1, width: func() int { return 80 }, prompt: "> "}
}

func (d *ttyDisplay) Echo() bool { return true }

// redraw writes the prompt and the visible tail of the line; mu is held.
func (d *ttyDisplay) redraw() {
	room := d.width() - utf8.RuneCountInString(d.prompt) - 1
	vis := d.line
	if room > 0 && len(vis) > room {
		vis = vis[len(vis)-room:]
	}
	io.WriteString(d.out, "\r\033[K"+d.prompt+string(vis))
}

func (d *ttyDisplay) Println(line string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	io.WriteString(d.out, "\r\033[K"+line+"\r\n")
	d.redraw()
}

func (d *ttyDisplay) ReadLine() (string, error) {
	for {
		r, _, err := d.in.ReadRune()
		if err != nil {
			return "", err
		}
		d.mu.Lock()
		switch {
		case r == '\r' || r == '\n':
			s := string(d.line)
			d.line = d.line[:0]
			d.redraw()
			d.mu.Unlock()
			return s, nil
		case r == 0x7F || r == 0x08: // Backspace
			if len(d.line) > 0 {
				d.line = d.line[:len(d.line)-1]
			}
		case r == 0x15: // Ctrl-U
			d.line = d.line[:0]
		case r == 0x04: // Ctrl-D
			if len(d.line) == 0 {
				d.mu.Unlock()
				return "", errQuit
			}
		case r == 0x03: // Ctrl-C, should ISIG be off
			d.mu.Unlock()
			return "", errQuit
		case r == 0x1B: // an escape sequence: skip it
			d.mu.Unlock()
			d.skipEscape()
			continue
		case r < ' ' || r == utf8.RuneError:
			// other control keys: ignored
		default:
			d.line = append(d.line, r)
		}
		d.redraw()
		d.mu.Unlock()
	}
}

// skipEscape reads the rest of an escape sequence: ESC [ params final, ESC
// O x, or ESC x.
func (d *ttyDisplay) skipEscape() {
	b, err := d.in.ReadByte()
	if err != nil {
		return
	}
	switch b {
	case '[':
		for {
			c, err := d.in.ReadByte()
			if err != nil || (c >= 0x40 && c <= 0x7E) {
				return
			}
		}
	case 'O':
		d.in.ReadByte()
	}
}

func (d *ttyDisplay) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	io.WriteString(d.out, "\r\033[K")
	if d.saved != nil {
		return restoreTerminal(d.fd, d.saved)
	}
	return nil
}
