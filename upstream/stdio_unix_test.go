//go:build unix

package upstream

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestProcessSaysHowItEnded: the words and the stderr lines a revival's error answers
// and log line are made of.
func TestProcessSaysHowItEnded(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawserver")
	var stderr bytes.Buffer
	p, err := Start(Command{Path: raw, Args: []string{"--exit-now", "--exit-code", "3", "--stderr", "one\ntwo\n\nfatal: boom\n"}, Name: "raw", Stderr: &syncWriter{w: &stderr}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := p.ExitReason(); got != "exited with status 3" {
		t.Fatalf("ExitReason %q", got)
	}
	if got := strings.Join(p.StderrTail(2), "|"); got != "two|fatal: boom" {
		t.Fatalf("StderrTail %q", got)
	}

	k, err := Start(Command{Path: raw, Args: []string{"--echo"}, Name: "raw", Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := syscall.Kill(k.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := k.ExitReason(); got != "was killed by signal 9 (killed)" {
		t.Fatalf("ExitReason %q", got)
	}
	if got := k.StderrTail(3); len(got) != 0 {
		t.Fatalf("StderrTail of a quiet server: %q", got)
	}
	if stderr.Len() == 0 || !strings.Contains(stderr.String(), "one\ntwo\n\nfatal: boom\n") {
		t.Fatalf("stderr not passed on unchanged: %q", stderr.String())
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func TestTailBuffer(t *testing.T) {
	var tb tailBuffer
	for i := 0; i < 1000; i++ {
		tb.write([]byte("line " + strings.Repeat("x", i%7) + "\n"))
	}
	tb.write([]byte("last, unfinished"))
	if got := tb.lines(2); len(got) != 2 || got[1] != "last, unfinished" || !strings.HasPrefix(got[0], "line ") {
		t.Fatalf("lines %q", got)
	}
	if len(tb.buf) > tailSize {
		t.Fatalf("tail holds %d bytes", len(tb.buf))
	}
	tb.write(bytes.Repeat([]byte("y"), 3*tailSize))
	if len(tb.buf) != tailSize {
		t.Fatalf("tail holds %d bytes", len(tb.buf))
	}
}

// TestProcessSlab: a Process whose messages are lent (Slab, a pure pipe:
// framing.WithLending) returns the same messages, byte for byte, as one that
// allocates each; a lent message stays whole while Buffered reads ahead (the relay
// holds it while the next is read) until the Read after a Buffered that said no;
// one that is not lent is never overwritten; and what is not a message still goes
// to Notes, never to the caller. The same with ReadLexed, whose Line describes the
// message it returns.
func TestProcessSlab(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawserver")
	var script strings.Builder
	var want []string
	for i := range 3000 {
		switch i % 500 {
		case 7:
			script.WriteString("Server listening on stdio\n")
		case 8:
			script.WriteString("{not json}\n")
		case 9:
			// Larger than a slab's small message: allocated on its own.
			m := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"result":{"text":"` + strings.Repeat("y", 5000) + `"}}`
			script.WriteString(m + "\r\n")
			want = append(want, m)
		default:
			m := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"result":{"content":[{"type":"text","text":"\u00e9 ` + strconv.Itoa(i*7919) + `"}]}}`
			script.WriteString(m + "\n")
			want = append(want, m)
		}
	}
	emit := filepath.Join(t.TempDir(), "emit")
	if err := os.WriteFile(emit, []byte(script.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ slab, lexed bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		slab := tc.slab
		var notes testutil.SyncBuffer
		p, err := Start(Command{Path: raw, Args: []string{"--emit", emit}, Name: "raw", Stderr: io.Discard, Notes: &notes, Slab: slab})
		if err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		var live [][]byte // messages lent and not yet due to be overwritten, as read
		var orig [][]byte // every message as Read returned it
		var lx, fresh jsonlex.Line
		for len(got) < len(want) {
			var msg []byte
			if tc.lexed {
				msg, err = p.ReadLexed(&lx)
			} else {
				msg, err = p.Read()
			}
			if err != nil {
				t.Fatalf("%+v: message %d: %v", tc, len(got), err)
			}
			if fresh.Lex(msg); tc.lexed && !reflect.DeepEqual(lx, fresh) {
				t.Fatalf("%+v: message %d lexed as %+v, want %+v", tc, len(got), lx, fresh)
			}
			got = append(got, bytes.Clone(msg))
			live, orig = append(live, msg), append(orig, msg)
			for i, m := range live {
				if string(m) != string(got[len(got)-len(live)+i]) {
					t.Fatalf("%+v: message %d changed before its reader read the server again: %.80q", tc, len(got)-len(live)+i, m)
				}
			}
			// Buffered reads ahead, as the relay's pump does under load.
			if !p.Buffered() {
				live = live[:0] // the next Read may read the server's stdout
			}
		}
		p.Close()
		if !slab {
			got = orig // not lent: each is still whole once all are read
		}
		for i := range want {
			if string(got[i]) != want[i] {
				t.Fatalf("slab %v: message %d is %.80q, want %.80q", slab, i, got[i], want[i])
			}
		}
		if n := strings.Count(notes.String(), "[raw] Server listening on stdio\n"); n != 6 {
			t.Fatalf("slab %v: %d banner lines on Notes, want 6: %.200q", slab, n, notes.String())
		}
		if n := strings.Count(notes.String(), "[raw] {not json}\n"); n != 6 {
			t.Fatalf("slab %v: %d non-JSON lines on Notes, want 6", slab, n)
		}
	}
}

// TestStrayLineIsEscapedOnNotes: a server's stdout line that is not a message goes to
// the proxy's stderr with its control characters escaped: a hostile server's ESC, BEL
// and ^A went out raw, to whatever terminal shows the proxy's stderr (a title set, a
// screen cleared). The message after it still reaches the reader, unchanged.
func TestStrayLineIsEscapedOnNotes(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawserver")
	emit := filepath.Join(t.TempDir(), "emit")
	const msg = `{"jsonrpc":"2.0","id":1,"result":{}}`
	if err := os.WriteFile(emit, []byte("hi \x1b]0;owned\x07 \x01 there\n"+msg+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var notes testutil.SyncBuffer
	p, err := Start(Command{Path: raw, Args: []string{"--emit", emit}, Name: "raw", Stderr: io.Discard, Notes: &notes})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, err := p.Read()
	if err != nil || string(got) != msg {
		t.Fatalf("read %q, %v; want %s", got, err, msg)
	}
	if n := notes.String(); strings.ContainsAny(n, "\x1b\x07\x01") || !strings.Contains(n, `[raw] hi \x1b]0;owned\x07 \x01 there`+"\n") {
		t.Fatalf("the stray line on Notes: %q", n)
	}
}
