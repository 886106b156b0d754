package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// pagesServer answers initialize, each tools/list with a page of 4 tools of 1 MB
// (distinct names: nothing replaces anything), and tools/call.
const pagesServer = `i=0
while IFS= read -r line; do
  case "$line" in
  *'"initialize"'*) printf '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"pages","version":"1"}}}\n' ;;
  *'"tools/list"'*)
    i=$((i+1))
    printf '{"jsonrpc":"2.0","id":%d,"result":{"tools":[' $i
    for k in 1 2 3 4; do
      [ $k -gt 1 ] && printf ','
      printf '{"name":"t%d_%d","inputSchema":{"type":"object"},"description":"' $i $k
      head -c 1000000 /dev/zero | tr '\0' a
      printf '"}'
    done
    printf ']}}\n' ;;
  *'"tools/call"'*) printf '{"jsonrpc":"2.0","id":999,"result":{"content":[]}}\n' ;;
  esac
done
`

// TestCassetteToolsListPagesBounded: with --cassette the proxy kept every tools/list
// page until the first call and built a header line of them all (100 pages of 4 MB:
// a 400 MB line, 2 GB, killed). The tools kept are bounded now (8 MiB): the proxy's
// peak stays under 64 MB over its idle size, and the cassette still reads.
func TestCassetteToolsListPagesBounded(t *testing.T) {
	w := newVerifyWorld(t)
	script := filepath.Join(w.dir, "pages.sh")
	if err := os.WriteFile(script, []byte(pagesServer), 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(w.dir, "cassettes", "pages.jsonl")
	p := testutil.Start(t, exec.Command(w.bp, "--cassette", path, "--", "/bin/sh", script))
	p.Send(sessionLines[:2]...)
	p.ReadLine()
	pid := p.Cmd.Process.Pid
	idle := procStatusKB(t, pid, "VmRSS") << 10
	const pages = 20
	for i := 1; i <= pages; i++ {
		p.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i))
		if l := p.ReadLine(); len(l) < 4_000_000 {
			t.Fatalf("page %d: %.200s", i, l)
		}
	}
	p.Send(`{"jsonrpc":"2.0","id":999,"method":"tools/call","params":{"name":"t1_1","arguments":{}}}`)
	p.ReadLine()
	// The header is built at the first call, then written: once it is on disk the
	// peak is behind us.
	testutil.Eventually(t, "the header in the cassette", func() bool {
		b, _ := os.ReadFile(path)
		return bytes.IndexByte(b, '\n') >= 0
	})
	peak := procStatusKB(t, pid, "VmHWM") << 10
	p.Stdin.Close()
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("exit %d: %s", code, p.Stderr.String())
	}
	t.Logf("idle %d MB, peak %d MB", idle>>20, peak>>20)
	if peak-idle > 64<<20 {
		t.Errorf("peak %d MB over an idle %d MB: past 64 MB", (peak-idle)>>20, idle>>20)
	}
	if n := cassetteCalls(t, path); n != 1 {
		t.Errorf("%d calls recorded, want 1", n)
	}
	if st, err := os.Stat(path); err == nil && st.Size() > 9<<20 {
		t.Errorf("the cassette is %d bytes: its header past the tools' bound", st.Size())
	}
	if !strings.Contains(p.Stderr.String(), "tools") {
		t.Errorf("stderr does not say tools were left out of the header:\n%s", p.Stderr.String())
	}
}

// TestCassetteVerifyRefusesOverCapLine: bir-proxy verify of a cassette with a 600 MB
// line (past the 512 MiB cap) cost 1.3 GB to refuse; it is refused now without the
// line ever being held: within a 256 MiB data limit (RLIMIT_DATA, set by prlimit: a
// Go process's heap; the old reader died of it, out of memory). The file is sparse.
func TestCassetteVerifyRefusesOverCapLine(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		if testutil.InCI() {
			t.Fatal("prlimit (util-linux) is needed on Linux CI")
		}
		t.Skip("no prlimit")
	}
	w := newVerifyWorld(t)
	path := filepath.Join(w.dir, "big.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"bir-cassette":1,"server":"x","command":["x"],"recordedAt":"2026-01-01T00:00:00Z","era":"unknown"}` + "\n" +
		`{"seq":1,"tool":"a","outcome":"ok","result":"`)
	f.Seek(600<<20, 1)
	f.WriteString(`"}` + "\n")
	f.Close()
	p := testutil.Start(t, exec.Command(prlimit, fmt.Sprintf("--data=%d", 256<<20), "--", w.bp, "verify", path, "--", w.vs))
	p.Stdin.Close()
	p.ReadRest()
	if code := p.ExitCode(); code == 0 {
		t.Fatalf("verify took a 600 MB line: %s", p.Stderr.String())
	}
	if !strings.Contains(p.Stderr.String(), "line 2: longer than") {
		t.Errorf("verify did not refuse the line within 256 MiB:\n%.1000s", p.Stderr.String())
	}
}
