// Command rxepeer is the peer agent of the two-host rxe harness
// (`make test-rxe2`): it runs in VM "b" and starts and stops commands for the
// tests running in VM "a" (see package peer). It exits when a client asks it
// to quit or on SIGTERM, stopping what it started. `rxepeer -quit HOST:PORT`
// asks an agent to quit.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-rdma/rdmanet/test/rxevm/peer"
)

func main() {
	listen := flag.String("listen", fmt.Sprintf(":%d", peer.DefaultPort), "TCP address to listen on")
	quit := flag.String("quit", "", "instead: ask the agent at this host:port to quit")
	flag.Parse()
	if *quit != "" {
		c, err := peer.Dial(*quit, 5*time.Second)
		if err == nil {
			err = c.Quit()
		}
		if err != nil {
			log.Fatal(err)
		}
		return
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	a := peer.NewAgent()
	srv := &http.Server{Handler: a.Handler()}
	go srv.Serve(ln)
	log.Printf("rxepeer: listening on %s", ln.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-a.Quit():
	case s := <-sig:
		log.Printf("rxepeer: %v", s)
	}
	a.StopAll()
	srv.Close()
	log.Printf("rxepeer: done")
}
