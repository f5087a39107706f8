package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// stopSignals end the chat: Ctrl-C, a kill, the terminal hanging up.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

type termios = unix.Termios

// isTerminal reports whether fd is a terminal.
func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

// newTTY puts the terminal of in in raw mode (no echo, no line
// discipline) and returns the line editor drawing on out.
func newTTY(in, out *os.File) (*ttyDisplay, error) {
	fd := int(in.Fd())
	saved, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *saved
	raw.Lflag &^= unix.ICANON | unix.ECHO | unix.IEXTEN
	raw.Iflag &^= unix.IXON
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	d := newEditor(in, out)
	d.fd, d.saved = fd, saved
	ofd := int(out.Fd())
	d.width = func() int {
		ws, err := unix.IoctlGetWinsize(ofd, unix.TIOCGWINSZ)
		if err != nil || ws.Col == 0 {
			return 80
		}
		return int(ws.Col)
	}
	d.mu.Lock()
	d.redraw()
	d.mu.Unlock()
	return d, nil
}

// restoreTerminal puts back the settings newTTY saved.
func restoreTerminal(fd int, saved *termios) error {
	return unix.IoctlSetTermios(fd, unix.TCSETS, saved)
}
