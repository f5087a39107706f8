package reliable

import (
	"testing"
	"time"
)

func TestDebugRTT(t *testing.T) {
	group := newGroup()
	r := listenDrop(t, group, Config{}, dropFirst(func(s uint64) bool { return s%100 == 3 }))
	tx := listenT(t, group, Config{})
	time.Sleep(20 * time.Millisecond)
	b := make([]byte, 64)
	start := time.Now()
	go func() {
		for i := uint64(0); i < 2000; i++ {
			tx.WriteTo(payload(b, i), group)
			time.Sleep(20 * time.Microsecond)
		}
	}()
	losses, err := readAll(r, 2000, 64, 5*time.Second)
	t.Logf("%v losses %d err %v", time.Since(start), losses, err)
	t.Logf("rx %+v", r.Stats())
	t.Logf("tx %+v", tx.Stats())
}
