package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// handshakeOnly is a host run with no tools/call: `claude mcp list`, a host's start or
// reconnect.
var handshakeOnly = sessionLines[:3]

// cassetteCalls reads the cassette at path whole and returns how many calls it holds;
// a file that does not read whole fails the test. -1: no file.
func cassetteCalls(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := cassette.NewReader(f, path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	n := 0
	for {
		if _, err := r.Next(); err == io.EOF {
			return n
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		n++
	}
}

// TestCassetteRunWithoutCallsKeepsTheRecording: every host start, reconnect or
// `claude mcp list` is a proxy run with no tools/call. Each started a new file and
// rotated the last away: 6 recorded calls left 3 one-call files, then a run with no
// call left the newest with 0 calls. A run with no call writes nothing now, and a run
// with calls rotates the older recording to PATH.1.
func TestCassetteRunWithoutCallsKeepsTheRecording(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)
	for range 4 {
		w.record("s", handshakeOnly)
	}
	if n := cassetteCalls(t, path); n != 7 {
		t.Fatalf("after 4 runs without a call the cassette holds %d calls, want the 7 recorded", n)
	}
	for n := 1; n <= cassette.DefaultKeep; n++ {
		if _, err := os.Stat(cassette.Rotated(path, n)); err == nil {
			t.Errorf("%s exists: a run without a call rotated the cassette", cassette.Rotated(path, n))
		}
	}
	w.record("s", sessionLines[:4]) // one call
	if a, b := cassetteCalls(t, path), cassetteCalls(t, cassette.Rotated(path, 1)); a != 1 || b != 7 {
		t.Errorf("after a run with one call: %d calls, %s %d; want 1 and the older 7", a, cassette.Rotated(path, 1), b)
	}
	// A fresh path and a run with no call: no file at all.
	fresh := w.record("fresh", handshakeOnly)
	if ents, _ := os.ReadDir(filepath.Dir(fresh)); cassetteCalls(t, fresh) != -1 {
		t.Errorf("a run with no call wrote %s (%d entries in its folder)", fresh, len(ents))
	}
}

// TestCassetteTwoProxiesOnOnePath: two hosts launching one wrapped config start two
// proxies on one cassette path. They wrote one file at their own offsets: torn lines,
// and verify refused the whole file. The second one now records beside it
// (NAME-2.jsonl), and both files read whole with every call.
func TestCassetteTwoProxiesOnOnePath(t *testing.T) {
	w := newVerifyWorld(t)
	path := filepath.Join(w.dir, "cassettes", "s.jsonl")
	const calls = 150
	var procs []*testutil.Proc
	for range 2 {
		p := testutil.Start(t, exec.Command(w.bp, "--cassette", path, "--", w.vs))
		p.Send(sessionLines[:3]...)
		p.ReadLine()
		p.ReadLine()
		procs = append(procs, p)
	}
	// Both started (and opened nothing yet); now their calls interleave.
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range calls {
				text := fmt.Sprintf("p%d-%d-%s", i, k, strings.Repeat("x", 3000))
				p.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"write_note","arguments":{"text":%q}}}`, 10+k, text))
				p.ReadLine()
			}
			p.Stdin.Close()
		}()
	}
	wg.Wait()
	for _, p := range procs {
		if code := p.ExitCode(); code != 0 {
			t.Fatalf("a proxy exited %d: %s", code, p.Stderr.String())
		}
	}
	a, b := cassetteCalls(t, path), cassetteCalls(t, cassette.Beside(path, 2))
	if a != calls || b != calls {
		t.Fatalf("%s holds %d calls, %s %d; want %d each", path, a, cassette.Beside(path, 2), b, calls)
	}
	said := procs[0].Stderr.String() + procs[1].Stderr.String()
	if !strings.Contains(said, "records beside it") {
		t.Errorf("the second proxy did not say where it records:\n%s", said)
	}
}

// TestCassetteSymlinkRefused: a symbolic link at the cassette's path (dangling, to a
// file, to a folder) was followed: the proxy created, truncated and chmodded what it
// pointed to. It is refused now, said on stderr, and the session still relays.
func TestCassetteSymlinkRefused(t *testing.T) {
	w := newVerifyWorld(t)
	dir := filepath.Join(w.dir, "cassettes")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(w.dir, "victim.txt")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	folder := t.TempDir()
	cases := map[string]string{
		"dangling": filepath.Join(w.dir, "nowhere.jsonl"),
		"file":     victim,
		"folder":   folder,
	}
	for name, target := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".jsonl")
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			p := testutil.Start(t, exec.Command(w.bp, "--cassette", path, "--", w.vs))
			p.Send(sessionLines[:4]...)
			for range 3 {
				if l := p.ReadLine(); !strings.Contains(l, `"result"`) {
					t.Fatalf("not relayed: %s", l)
				}
			}
			p.Stdin.Close()
			if code := p.ExitCode(); code != 0 {
				t.Fatalf("exit %d: %s", code, p.Stderr.String())
			}
			if !strings.Contains(p.Stderr.String(), "symbolic link") {
				t.Errorf("stderr does not say the link was refused:\n%s", p.Stderr.String())
			}
			if st, err := os.Lstat(path); err != nil || st.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the link was replaced: %v %v", st, err)
			}
		})
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
		t.Errorf("the linked file was written: %q", b)
	}
	if st, _ := os.Stat(victim); st.Mode().Perm() != 0o644 {
		t.Errorf("the linked file was chmodded: %v", st.Mode())
	}
	if _, err := os.Stat(cases["dangling"]); err == nil {
		t.Error("the dangling link's target was created")
	}
	if ents, _ := os.ReadDir(folder); len(ents) != 0 {
		t.Errorf("the linked folder got %d entries", len(ents))
	}
	if st, _ := os.Stat(folder); st.Mode().Perm() != 0o700 && st.Mode().Perm() != 0o755 {
		t.Logf("folder mode %v", st.Mode())
	}
}

// TestCassetteFullDisk: a write that fails (a full disk; here a file size limit,
// RLIMIT_FSIZE, set by prlimit) left part of a line, and the cassette read
// "line N: truncated" and nothing after; stderr had a warning per call (~3,000 for
// 3,000 calls). The file now ends at its last whole line, and the failure is said
// once.
func TestCassetteFullDisk(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		if runtime.GOOS == "linux" && testutil.InCI() {
			t.Fatal("prlimit (util-linux) is needed on Linux CI")
		}
		t.Skip("no prlimit")
	}
	w := newVerifyWorld(t)
	path := filepath.Join(w.dir, "cassettes", "s.jsonl")
	const calls, limit = 300, 100_000
	p := testutil.Start(t, exec.Command(prlimit, fmt.Sprintf("--fsize=%d", limit), "--", w.bp, "--cassette", path, "--", w.vs))
	p.Send(sessionLines[:3]...)
	p.ReadLine()
	p.ReadLine()
	for k := range calls {
		p.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"write_note","arguments":{"text":"%d-%s"}}}`, 10+k, k, strings.Repeat("x", 1000)))
		if l := p.ReadLine(); !strings.Contains(l, `"noted"`) {
			t.Fatalf("not relayed: %s", l)
		}
	}
	p.Stdin.Close()
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("exit %d: %s", code, p.Stderr.String())
	}
	n := cassetteCalls(t, path) // fails the test on a partial line
	if n == 0 || n >= calls {
		t.Errorf("%d calls recorded under a %d-byte limit", n, limit)
	}
	if st, _ := os.Stat(path); st.Size() > limit {
		t.Errorf("size %d past the limit", st.Size())
	}
	if said := strings.Count(p.Stderr.String(), "cannot write the cassette"); said != 1 {
		t.Errorf("the failed write said %d times, want once:\n%.2000s", said, p.Stderr.String())
	}
}

// bigResultBytes is past the cassette's per-call bound (cassette.DefaultMaxCallBytes).
const bigResultBytes = cassette.DefaultMaxCallBytes + 6<<20

// bigResultDir is a rawserver --result-dir where tool "big" answers a text of
// bigResultBytes.
func bigResultDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "big.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	io.WriteString(f, `{"content":[{"type":"text","text":"`)
	chunk := strings.Repeat("x", 1<<20)
	for range bigResultBytes >> 20 {
		io.WriteString(f, chunk)
	}
	if _, err := io.WriteString(f, `"}]}`); err != nil {
		t.Fatal(err)
	}
	return dir
}

// cassetteLines reads the cassette at path whole: tool → how many calls of it, and
// how many of them were recorded too large (TooLarge set, no values).
func cassetteLines(t *testing.T, path string) (calls, tooLarge map[string]int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no cassette: %v", err)
	}
	defer f.Close()
	r, err := cassette.NewReader(f, path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	calls, tooLarge = map[string]int{}, map[string]int{}
	for {
		c, err := r.Next()
		if err == io.EOF {
			return calls, tooLarge
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		calls[c.Tool]++
		if c.TooLarge > 0 {
			if c.Result != nil || c.Error != nil || c.Arguments != nil {
				t.Errorf("call %d (%s) recorded too large still holds values", c.Seq, c.Tool)
			}
			tooLarge[c.Tool]++
		}
	}
}

// TestCassetteTooLargeCallRecordedAsSuch: a call whose answer is past what a
// cassette keeps of one call (64 MiB) was dropped and only counted ("dropped=3"); a
// run whose calls were all such wrote no cassette at all. The calls that fit are
// recorded, the one too large is recorded as such (its tool, outcome and time, no
// values), stderr names it, and verify says it is not replayable because it was too
// large, rather than missing it. Through `call --script` and the proxy, with 2 and 8
// calls (8 in flight through the proxy), one of them too large.
func TestCassetteTooLargeCallRecordedAsSuch(t *testing.T) {
	w := newCallWorld(t)
	dir := bigResultDir(t)
	check := func(t *testing.T, path, stderr string, n int) {
		t.Helper()
		calls, tooLarge := cassetteLines(t, path)
		if calls["echo"] != n-1 || calls["big"] != 1 || tooLarge["big"] != 1 || tooLarge["echo"] != 0 {
			t.Fatalf("calls %v, too large %v; want %d echo and 1 big recorded too large\nstderr: %s", calls, tooLarge, n-1, stderr)
		}
		if !strings.Contains(stderr, "too large") || !strings.Contains(stderr, `tool=big`) {
			t.Errorf("stderr does not name the call left out:\n%s", stderr)
		}
		p := testutil.Start(t, exec.Command(w.bp, "verify", "--json", "--allow-writes", path, "--", w.raw, "--reply", "--result-dir", dir))
		p.Stdin.Close()
		out := string(p.ReadRest())
		p.ExitCode()
		var big map[string]any
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("verify: not a JSON line %q: %v\n%s", l, err, p.Stderr.String())
			}
			if m["tool"] == "big" {
				big = m
			}
		}
		if big == nil || big["status"] != "not_replayable" || !strings.Contains(fmt.Sprint(big["reason"]), "too large") {
			t.Errorf("verify on the big call: %v\n%s", big, out)
		}
	}
	for _, n := range []int{2, 8} {
		t.Run(fmt.Sprintf("call/%d", n), func(t *testing.T) {
			var steps []string
			for i := range n {
				if i == n/2 {
					steps = append(steps, `{"tool":"big","arguments":{}}`)
				} else {
					steps = append(steps, fmt.Sprintf(`{"tool":"echo","arguments":{"i":%d}}`, i))
				}
			}
			script := filepath.Join(w.dir, fmt.Sprintf("steps%d.json", n))
			if err := os.WriteFile(script, []byte("["+strings.Join(steps, ",")+"]"), 0o600); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(w.dir, fmt.Sprintf("call%d.jsonl", n))
			cmd := exec.Command(w.bp, "call", "--script", script, "--cassette", path, "--", w.raw, "--reply", "--result-dir", dir)
			p := testutil.Start(t, cmd)
			p.Stdin.Close()
			go io.Copy(io.Discard, p.Stdout) // the results printed, not held
			if code := p.ExitCode(); code != 0 {
				t.Fatalf("call exited %d: %s", code, p.Stderr.String())
			}
			check(t, path, p.Stderr.String(), n)
		})
		t.Run(fmt.Sprintf("proxy/%d", n), func(t *testing.T) {
			path := filepath.Join(w.dir, fmt.Sprintf("proxy%d.jsonl", n))
			cmd := exec.Command(w.bp, "--cassette", path, "--", w.raw, "--reply", "--result-dir", dir)
			p := testutil.Start(t, cmd)
			p.Send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			// The answers are read without being held: a test process grown by the
			// big one made the peak RSS of children it starts later (ru_maxrss counts
			// the parent's memory at the exec) fail their own bounds.
			out := bufio.NewReaderSize(p.Stdout, 64<<10)
			skipLine := func() {
				t.Helper()
				for {
					_, err := out.ReadSlice('\n')
					if err == nil {
						return
					}
					if err != bufio.ErrBufferFull {
						t.Fatalf("reading the proxy's stdout: %v", err)
					}
				}
			}
			skipLine()
			for i := range n { // all in flight before the first answer is read
				tool := "echo"
				if i == n/2 {
					tool = "big"
				}
				p.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"i":%d}}}`, i+1, tool, i))
			}
			for range n {
				skipLine()
			}
			p.Stdin.Close()
			if code := p.ExitCode(); code != 0 {
				t.Fatalf("the proxy exited %d: %s", code, p.Stderr.String())
			}
			check(t, path, p.Stderr.String(), n)
		})
	}
}
