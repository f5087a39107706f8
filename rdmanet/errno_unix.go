//go:build !plan9

package rdmanet

import "syscall"

// sysErrno is the system's errno type, and these the errnos a failed send
// is classified by (stats.go: sendReasonOf). plan9 has neither
// (errno_plan9.go).
type sysErrno = syscall.Errno

const (
	errEMSGSIZE     = syscall.EMSGSIZE
	errENETUNREACH  = syscall.ENETUNREACH
	errEHOSTUNREACH = syscall.EHOSTUNREACH
	errETIMEDOUT    = syscall.ETIMEDOUT
	errEPERM        = syscall.EPERM
	errEACCES       = syscall.EACCES
	errENOBUFS      = syscall.ENOBUFS
	errEINVAL       = syscall.EINVAL
)
