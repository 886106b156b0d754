// Package cause is the words for a server that cannot start, or that exits before it
// has answered anything.
//
// Hosts show a server's stderr to almost nobody: when the server cannot start, or
// exits before it has answered anything, the host's only clue is "Connection closed"
// (or nothing at all). These say why, for the error answers the relay gives each
// request the host sent (upstream.NoServer, and revive's Policy.NoRestart), and for
// `bir-proxy status --check`: the exec error, or the exit status and the last lines
// the server printed on stderr (upstream.StderrWords picks them).
package cause

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/upstream"
)

// exitWait bounds how long the cause waits for the exit status after the server
// closed its stdout: one that closed it and lives on is described without one.
const exitWait = time.Second

// TailLines is how many of the server's stderr lines the host is shown
// (upstream.StderrWords: the first that look like an error, then the last), of the
// last stderrRead it wrote.
const (
	TailLines  = 6
	stderrRead = 60
)

// Exit describes a server that went away before answering: how it ended and the
// last lines it printed on stderr (upstream.ExitDescriber keeps them).
func Exit(name string, command []string, conn upstream.Conn) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bir-proxy: the MCP server %q (%s) ", name, termtext.Argv(command))
	d := conn.Capabilities().ExitDescriber
	if d == nil {
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
	if words := upstream.StderrWords(d.StderrTail(stderrRead), TailLines); words != "" {
		b.WriteString("; " + words)
	} else {
		b.WriteString("; it printed nothing on stderr")
	}
	return b.String()
}

// Start describes a server command that could not be started, and the exit status
// the proxy ends with (what a shell says for the same failure: 127 for a command
// not found, else 126).
func Start(name string, command []string, err error) (string, int) {
	code := 126
	hint := ""
	if errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "executable file not found") {
		code = 127
		hint = " (is it installed, and on the PATH the host starts its servers with?)"
	}
	return fmt.Sprintf("bir-proxy: cannot start the MCP server %q (%s): %v%s", name, termtext.Argv(command), err, hint), code
}
