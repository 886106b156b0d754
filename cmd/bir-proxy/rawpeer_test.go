package main

import (
	"net"
	"sync"
	"testing"
)

// rawPeer is a scripted peer on 127.0.0.1 (a recorder, an HTTP or SSE server) that
// writes exactly the bytes a test wants: serve gets each connection in a goroutine of
// its own. Every connection is closed, and every goroutine joined, when the test ends.
// It returns the listener's address.
func rawPeer(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}
