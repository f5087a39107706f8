//go:build !linux

package main

import (
	"errors"
	"os"
)

// Off Linux the chat has no terminal editor (it has no conn either:
// rdmanet needs Linux): every display is a pipe display.
type termios struct{}

var stopSignals = []os.Signal{os.Interrupt}

func isTerminal(int) bool { return false }

func newTTY(*os.File, *os.File) (*ttyDisplay, error) {
	return nil, errors.New("chat: the terminal editor needs Linux")
}

func restoreTerminal(int, *termios) error { return nil }
