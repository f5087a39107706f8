// Package unread lets rdmanet/reliable ask an *rdmanet.Conn whether
// received datagrams wait to be read, without a method in rdmanet's API.
// Package rdmanet sets Check (rdmanet/pending.go).
package unread

// Check reports whether conn, an *rdmanet.Conn, holds received datagrams
// it has not handed out yet: known true, or known false. known is false
// where the conn cannot tell without waiting (see rdmanet/pending.go).
// Nil until package rdmanet is initialized, which it is wherever an
// *rdmanet.Conn exists.
var Check func(conn any) (unread, known bool)
