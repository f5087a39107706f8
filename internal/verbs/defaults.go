package verbs

// The model's defaults: what a zero field of QPConfig takes. Providers
// apply them in CreateQP with WithDefaults, and rdmanet's ListenConfig
// starts from them (rdmanet/config.go, withDefaults): they are set here
// and nowhere else.
const (
	// DefaultSendDepth is the send queue depth.
	DefaultSendDepth = 256
	// DefaultRecvDepth is the receive queue depth.
	DefaultRecvDepth = 512
	// SoftSocketBuffer is the SO_RCVBUF and SO_SNDBUF, in bytes, the
	// software provider asks for each of a QP's sockets (the kernel
	// caps them at net.core.rmem_max and wmem_max).
	SoftSocketBuffer = 4 << 20
)

// WithDefaults returns c with its zero depths and Q_Key at their defaults
// (DefaultSendDepth, DefaultRecvDepth, DefaultQKey).
func (c QPConfig) WithDefaults() QPConfig {
	if c.SendDepth <= 0 {
		c.SendDepth = DefaultSendDepth
	}
	if c.RecvDepth <= 0 {
		c.RecvDepth = DefaultRecvDepth
	}
	if c.QKey == 0 {
		c.QKey = DefaultQKey
	}
	return c
}
