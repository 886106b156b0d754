package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/upstream"
)

// Hosts show a server's stderr to almost nobody: when the server cannot start, or
// exits before it has answered anything, the host's only clue is "Connection closed"
// (or nothing at all). These say why, for the error answers the relay gives each
// request the host sent (upstream.NoServer, and revive's Policy.NoRestart): the exec
// error, or the exit status and the last lines the server printed on stderr.

// exitWait bounds how long the cause waits for the exit status after the server
// closed its stdout: one that closed it and lives on is described without one.
const exitWait = time.Second

// tailLines is how many of the server's last stderr lines the host is shown.
const tailLines = 6

// exitCause describes a server that went away before answering: how it ended and the
// last lines it printed on stderr (upstream.ExitDescriber keeps them).
func exitCause(name string, command []string, conn upstream.Conn) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bir-proxy: the MCP server %q (%s) ", name, commandLine(command))
	d, ok := conn.(upstream.ExitDescriber)
	if !ok {
		b.WriteString("closed its output before answering")
		return b.String()
	}
	how := make(chan string, 1)
	go func() { how <- d.ExitReason() }()
	select {
	case h := <-how:
		b.WriteString(h + " before answering")
	case <-time.After(exitWait):
		b.WriteString("closed its output before answering")
	}
	var lines []string
	for _, l := range d.StderrTail(tailLines) {
		if l = cleanLine([]byte(l)); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > 0 {
		b.WriteString("; its last stderr lines: " + strings.Join(lines, " | "))
	} else {
		b.WriteString("; it printed nothing on stderr")
	}
	return b.String()
}

// startFailure describes a server command that could not be started, and the exit
// status the proxy ends with (what a shell says for the same failure).
func startFailure(name string, command []string, err error) (string, int) {
	code := 126
	hint := ""
	if errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "executable file not found") {
		code = 127
		hint = " (is it installed, and on the PATH the host starts its servers with?)"
	}
	return fmt.Sprintf("bir-proxy: cannot start the MCP server %q (%s): %v%s", name, commandLine(command), err, hint), code
}

// cleanLine is a stderr line fit for a message: colours and other escape sequences
// out, control characters out, surrounding space trimmed.
func cleanLine(p []byte) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == 0x1b && i+1 < len(p) && p[i+1] == '[': // CSI: ESC [ params final
			i += 2
			for i < len(p) && (p[i] < 0x40 || p[i] > 0x7e) {
				i++
			}
		case c == '\t':
			b.WriteByte(' ')
		case c < ' ' || c == 0x7f:
		default:
			b.WriteByte(c)
		}
	}
	return strings.ToValidUTF8(strings.TrimSpace(b.String()), "?")
}
