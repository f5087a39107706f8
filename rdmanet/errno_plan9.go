package rdmanet

import "strconv"

// sysErrno stands in for an errno on plan9, whose system calls return
// strings: rdmanet does not run there (every backend is unavailable), so
// no send is ever classified by these; they keep the code compiling.
type sysErrno uintptr

func (e sysErrno) Error() string { return "errno " + strconv.Itoa(int(e)) }

// Linux's numbers, for the classification code only.
const (
	errEMSGSIZE     sysErrno = 90
	errENETUNREACH  sysErrno = 101
	errEHOSTUNREACH sysErrno = 113
	errETIMEDOUT    sysErrno = 110
	errEPERM        sysErrno = 1
	errEACCES       sysErrno = 13
	errENOBUFS      sysErrno = 105
	errEINVAL       sysErrno = 22
)
