//go:build unix

package upstream

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// deepStack bounds the goroutine stack of the test binary while f runs: a check
// that recursed once per level of a peer's nesting overflows it (a fatal error that
// ends the test binary, as it ended the proxy), and an iterative one does not notice.
// 64 MB is far above what the relay's own frames need and far below what gjson's
// recursive validator took for a 1 MiB line of brackets.
func deepStack(t *testing.T, f func()) {
	t.Helper()
	old := debug.SetMaxStack(64 << 20)
	defer debug.SetMaxStack(old)
	f()
}

func nested(open, close int) []byte {
	return append(bytes.Repeat([]byte("["), open), bytes.Repeat([]byte("]"), close)...)
}

// TestIsMessageDoesNotRecurseOnDeepNesting: IsMessage validates a line of up to
// 1 MiB in full; it used gjson.ValidBytes, which recurses per level, so a server (or a
// remote endpoint's event) of nested brackets took the stack with it.
func TestIsMessageDoesNotRecurseOnDeepNesting(t *testing.T) {
	half := smallLine / 2
	deepStack(t, func() {
		if !IsMessage(nested(half, half)) {
			t.Error("a 1 MiB array of nested arrays is valid JSON, but IsMessage said no")
		}
		if IsMessage(nested(smallLine-1, 1)) {
			t.Error("a 1 MiB line of unclosed brackets passed as a message")
		}
		// Over smallLine the ends are judged, never the depth.
		if !IsMessage(nested(10_000_000, 10_000_000)) {
			t.Error("10^7 levels, closed: judged not a message")
		}
	})
}

// TestProcessSurvivesADeepUnfinishedLastLine: a server that writes 10^7 "[" with no
// newline and exits. Its unfinished last line is validated in full whatever its size,
// and that validation recursed (gjson.ValidBytes): "fatal error: stack overflow". Now
// the line is dropped with a warning and Read ends with io.EOF, after the messages the
// server did finish.
func TestProcessSurvivesADeepUnfinishedLastLine(t *testing.T) {
	var log testutil.SyncBuffer
	script := `printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{}}'; head -c 10000000 /dev/zero | tr '\0' '['`
	p, err := Start(Command{Path: "sh", Args: []string{"-c", script}, Name: "deep", Stderr: io.Discard, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	deepStack(t, func() {
		var lx jsonlex.Line
		msg, err := p.ReadLexed(&lx)
		if err != nil || string(msg) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
			t.Fatalf("first message %q, %v", msg, err)
		}
		if msg, err := p.ReadLexed(&lx); !errors.Is(err, io.EOF) {
			t.Fatalf("after the unfinished line: %d bytes, %v; want io.EOF", len(msg), err)
		}
	})
	if !strings.Contains(log.String(), "discarded the unfinished line") {
		t.Fatalf("no warning about the dropped line; log: %s", log.String())
	}
}

// FuzzIsMessage: the line classifier every server line and remote event goes through
// never panics, never recurses on its input, and agrees with jsonlex.Valid (the
// host's JSON.parse) on lines it validates in full.
func FuzzIsMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`, `[{"jsonrpc":"2.0","method":"x"}]`, `[INFO] ready]`,
		`{ }`, "\t[]\r\n", `{"a":`, `[1,2`, "{\"a\":\"\\u00e9\"}", `[tru]`,
	} {
		f.Add([]byte(s))
	}
	// Nesting-depth seeds: a validator that recurses per level overflows on these.
	f.Add(nested(smallLine/2, smallLine/2))
	f.Add(nested(smallLine-1, 1))
	f.Add(append(bytes.Repeat([]byte(`{"a":[`), 100_000), '}'))
	f.Fuzz(func(t *testing.T, line []byte) {
		got := IsMessage(line)
		trimmed := bytes.Trim(line, " \t\r\n")
		if len(trimmed) > smallLine || len(trimmed) < 2 {
			return
		}
		first, last := trimmed[0], trimmed[len(trimmed)-1]
		shaped := (first == '{' && last == '}') || (first == '[' && last == ']')
		if want := shaped && jsonlex.Valid(trimmed); got != want {
			t.Fatalf("IsMessage(%.80q) = %v, want %v", line, got, want)
		}
	})
}
