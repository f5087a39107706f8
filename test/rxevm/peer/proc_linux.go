package peer

import (
	"os"
	"syscall"
)

// ownProcessGroup starts a command in its own process group, so that
// signalGroup reaches what it started too.
func ownProcessGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends SIGINT (or SIGKILL) to p's process group.
func signalGroup(p *os.Process, kill bool) {
	sig := syscall.SIGINT
	if kill {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-p.Pid, sig)
}
