//go:build !plan9

package sysfs

import "syscall"

// errNoDevice is what reading an attribute of a device that went away
// returns.
var errNoDevice error = syscall.ENODEV
