package wrapcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/cause"
	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/mcpconfig"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/upstream"
)

// Issue 40: every mistake says what it is. `status --check` starts each wrapped
// entry the way the host would and says what the host would get (checkEntry).

// EntryCheck is what `status --check` found starting one wrapped entry.
type EntryCheck struct {
	OK    bool   `json:"ok"`
	Tools int    `json:"tools"`
	Error string `json:"error,omitempty"`
}

func (ch EntryCheck) String() string {
	if ch.OK {
		return fmt.Sprintf("OK (%d %s)", ch.Tools, plural(ch.Tools, "tool", "tools"))
	}
	return "FAILED: " + ch.Error
}

// DefaultCheckTimeout bounds one entry's check: start, initialize, tools/list.
const DefaultCheckTimeout = 20 * time.Second

const (
	checkMaxMessage = 16 << 20 // a tools/list answer larger than this is not read
	checkMaxPages   = 100      // tools/list pages followed
	checkStopGrace  = 3 * time.Second
	checkStderrMax  = 64 << 10 // the last bytes of stderr kept for the message
	checkProtocol   = "2025-11-25"
)

// checkEntries checks the wrapped entries of servers (the others get no check), a
// few at a time, and returns each one's check by index.
func checkEntries(ctx context.Context, servers []mcpconfig.Server, timeout time.Duration) map[int]EntryCheck {
	out := map[int]EntryCheck{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, s := range servers {
		if s.Kind != mcpconfig.KindWrapped && s.Kind != mcpconfig.KindWrappedRemote {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ch := checkEntry(ctx, s, timeout)
			mu.Lock()
			out[i] = ch
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// checkEntry starts a wrapped entry as the host would (its command, args and env as
// written, ${VAR} expanded from this environment), sends initialize,
// notifications/initialized and tools/list, and says what came back: the number of
// tools, or the error the host would get. What it started is stopped before it
// returns: stdin closed, then killed after checkStopGrace.
func checkEntry(ctx context.Context, s mcpconfig.Server, timeout time.Duration) EntryCheck {
	fail := func(format string, a ...any) EntryCheck {
		return EntryCheck{Error: redact.Text(fmt.Sprintf(format, a...))}
	}
	command, err := upstream.Expand(s.ProxyCommand, "command", os.LookupEnv)
	if err != nil {
		return fail("%v", err)
	}
	args := make([]string, len(s.Args))
	for i, a := range s.Args {
		if args[i], err = upstream.Expand(a, "args", os.LookupEnv); err != nil {
			return fail("%v", err)
		}
	}
	env := os.Environ()
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		if v, err = upstream.Expand(v, "env "+k, os.LookupEnv); err != nil {
			return fail("%v", err)
		}
		env = append(env, k+"="+v)
	}

	cmd := exec.Command(command, args...)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fail("%v", err)
	}
	// A pipe of our own, not StdoutPipe: Wait closes that one when the command
	// exits, and the error answer a proxy writes just before exiting (a usage
	// error) would be lost unread.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		stdin.Close()
		return fail("%v", err)
	}
	defer stdout.Close() // ends the reader below
	cmd.Stdout = stdoutW
	stderr := &tailBuffer{max: checkStderrMax}
	cmd.Stderr = stderr
	cmd.WaitDelay = time.Second // a grandchild holding stderr open must not hold Wait
	err = cmd.Start()
	stdoutW.Close()
	if err != nil {
		stdin.Close()
		return fail("cannot start %s: %v", command, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		stdin.Close() // the proxy stops its server when its stdin ends
		select {
		case <-exited:
		case <-time.After(checkStopGrace):
			cmd.Process.Kill()
			<-exited
		}
	}()

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		r := framing.NewReader(stdout, framing.WithMaxMessage(checkMaxMessage))
		for {
			line, err := r.Read()
			if err != nil {
				readErr <- err
				return
			}
			select {
			case lines <- line:
			case <-exited:
				return
			}
		}
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	// gone describes a command that closed its output before answering.
	gone := func(what string) EntryCheck {
		select {
		case <-exited:
		case <-time.After(2 * time.Second):
			return fail("closed its output before answering %s%s", what, stderr.words())
		}
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) {
			return fail("exited with status %d before answering %s%s", ee.ExitCode(), what, stderr.words())
		}
		return fail("exited before answering %s%s", what, stderr.words())
	}
	// call sends a request and waits for its answer, skipping anything else.
	call := func(id int, method, params string) (json.RawMessage, EntryCheck, bool) {
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
		if _, err := io.WriteString(stdin, msg); err != nil {
			return nil, gone(method), false
		}
		for {
			select {
			case line := <-lines:
				var resp struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
					Result json.RawMessage `json:"result"`
					Error  *struct {
						Message string `json:"message"`
					} `json:"error"`
				}
				if json.Unmarshal(line, &resp) != nil || resp.Method != "" || string(resp.ID) != fmt.Sprint(id) {
					continue // a notification, a request of the server's, a batch
				}
				if resp.Error != nil {
					return nil, fail("%s answered with an error: %s", method, capText(resp.Error.Message)), false
				}
				return resp.Result, EntryCheck{}, true
			case err := <-readErr:
				if errors.Is(err, io.EOF) {
					return nil, gone(method), false
				}
				return nil, fail("reading the answer to %s: %v", method, err), false
			case <-deadline.C:
				return nil, fail("no answer to %s within %v%s", method, timeout, stderr.words()), false
			case <-ctx.Done():
				return nil, fail("%v", ctx.Err()), false
			}
		}
	}

	init := fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"bir-proxy status --check","version":"0"}}`, checkProtocol)
	if _, ch, ok := call(1, "initialize", init); !ok {
		return ch
	}
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		return gone("notifications/initialized")
	}
	tools := 0
	cursor := ""
	for page := 0; page < checkMaxPages; page++ {
		params := "{}"
		if cursor != "" {
			params = fmt.Sprintf(`{"cursor":%q}`, cursor)
		}
		res, ch, ok := call(2+page, "tools/list", params)
		if !ok {
			return ch
		}
		var list struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &list); err != nil {
			return fail("tools/list answered with a result that is not a tool list: %v", err)
		}
		tools += len(list.Tools)
		if cursor = list.NextCursor; cursor == "" {
			break
		}
	}
	return EntryCheck{OK: true, Tools: tools}
}

// capText is s cut to 4 KiB on a character boundary, control characters escaped
// (termtext.Line): a peer's error message is printed, whole when it is of a sane size (the
// proxy's own names the server's command line, then the cause).
func capText(s string) string {
	const max = 4 << 10
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "…"
	}
	return termtext.Line(s)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// words is "; its stderr: …" (upstream.StderrWords) or "".
func (t *tailBuffer) words() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w := upstream.StderrWords(strings.Split(string(t.buf), "\n"), cause.TailLines); w != "" {
		return "; " + w
	}
	return ""
}
