// Command sockserver is a scripted MCP server for tests that must say exactly which
// bytes the server writes and when: it connects to the TCP address in its first
// argument and copies that connection to its stdout and its stdin to the connection,
// byte for byte, each read written at once. A test on the other end writes half a
// line, stalls, writes the rest, and reads every line the proxy sent. When the
// connection ends the server exits with status 0 (after closing its stdout), so
// closing it is a server's death at a chosen byte.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sockserver HOST:PORT")
		os.Exit(2)
	}
	c, err := net.Dial("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "sockserver: %v\n", err)
		os.Exit(1)
	}
	go func() {
		_, _ = io.Copy(c, os.Stdin)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite() // the proxy closed our stdin: the test reads EOF
		}
	}()
	_, _ = io.Copy(os.Stdout, c)
	os.Stdout.Close()
	os.Exit(0)
}
