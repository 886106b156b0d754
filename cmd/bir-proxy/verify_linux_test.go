package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// verifyMaxRSS runs bir-proxy verify with args to its end and returns its exit code,
// stderr and peak resident memory in bytes (runPeakRSS: verify's own).
func (w *verifyWorld) verifyMaxRSS(args ...string) (int, string, int64) {
	w.t.Helper()
	cmd := exec.Command(w.bp, append([]string{"verify"}, args...)...)
	var errs strings.Builder
	cmd.Stderr = &errs
	peak, err := runPeakRSS(cmd, 0)
	if cmd.ProcessState == nil {
		w.t.Fatalf("verify did not run: %v", err)
	}
	return cmd.ProcessState.ExitCode(), errs.String(), peak
}

// A server whose tools/list pages for ever, each page big: verify kept every page
// twice, without a bound on bytes (300 pages of large tools: 2 GB, --plan too). The
// tools kept are bounded (8 MiB): past them verify stops paging, and says so.
func TestVerifyEndlessToolsListIsBounded(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)
	code, errs, idle := w.verifyMaxRSS(path, "--tool", "greet", "--", w.vs)
	if code != 0 {
		t.Fatalf("idle run: exit %d\n%s", code, errs)
	}
	for _, plan := range []bool{false, true} {
		args := []string{path, "--tool", "greet"}
		if plan {
			args = append(args, "--plan")
		}
		code, errs, peak := w.verifyMaxRSS(append(args, "--", w.vs, "--endless-pages", "131072")...)
		if code != 0 || !strings.Contains(errs, "stopped paging") {
			t.Errorf("plan %v: exit %d\n%s", plan, code, errs)
		}
		t.Logf("plan %v: peak RSS %d MB, an idle run's %d MB", plan, peak>>20, idle>>20)
		if peak-idle > 64<<20 {
			t.Errorf("plan %v: peak RSS %d MB, %d MB over an idle run's", plan, peak>>20, (peak-idle)>>20)
		}
	}
}

// rawCassette writes a cassette of rawserver's session (as bir-proxy call records
// one) holding a call of each tool in results (name → result), every tool read-only,
// and the file of tools/list pages rawserver answers with. It returns both paths.
func rawCassette(t *testing.T, dir string, tools []string, results map[string][]byte) (cassette, pages string) {
	t.Helper()
	var list []string
	for _, name := range tools {
		list = append(list, `{"name":"`+name+`","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`)
	}
	pages = filepath.Join(dir, "pages.json")
	if err := os.WriteFile(pages, []byte(`[{"tools":[`+strings.Join(list, ",")+`]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString(`{"bir-cassette":1,"server":"rawserver","command":["rawserver"],"recordedAt":"2026-12-06T13:37:08Z","era":"session","protocolVersion":"2025-11-25",` +
		`"initialize":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bir-proxy call","version":"1"}},"initialized":true,` +
		`"initializeResult":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"rawserver","version":"0.0.1"}},` +
		`"tools":[` + strings.Join(list, ",") + "]}\n")
	for i, name := range tools {
		fmt.Fprintf(&b, `{"seq":%d,"tool":%q,"outcome":"ok","result":%s,"startedAt":"2026-12-06T13:37:08Z","durationMs":1}`+"\n", i+1, name, results[name])
	}
	fmt.Fprintf(&b, `{"end":true,"calls":%d}`+"\n", len(tools))
	cassette = filepath.Join(dir, "c.jsonl")
	if err := os.WriteFile(cassette, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return cassette, pages
}

// textResult is a result of one text block.
func textResult(text string) []byte {
	b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
	return b
}

// A server answering 8 MiB of text on one line where the cassette holds another 8
// MiB: the diff printed both lines whole (16 MiB of output for one call; 100 MB
// answers, 209 MB), and a text of 1000 lines of 8 KiB differing at their ends was
// compared a whole line per cell of the diff's table (95 MB answers of 1900 such
// lines: 90 s, 1.2 GB, 190 MB printed). A rendered line is clipped, with its hash,
// and a call's diff is clipped, with a note.
func TestVerifyHugeDiffIsClipped(t *testing.T) {
	w := newVerifyWorld(t)
	raw := testutil.Build(t, "./testdata/rawserver")
	lines := func(end string) string {
		var b strings.Builder
		for i := range 1000 {
			b.WriteString(strings.Repeat("x", 8<<10) + end + strconv.Itoa(i) + "\n")
		}
		return b.String()
	}
	rec := map[string][]byte{"one": textResult(strings.Repeat("a", 8<<20)), "lines": textResult(lines("a"))}
	c, pages := rawCassette(t, w.dir, []string{"one", "lines"}, rec)
	cur := filepath.Join(w.dir, "cur")
	os.Mkdir(cur, 0o700)
	os.WriteFile(filepath.Join(cur, "one.json"), textResult(strings.Repeat("b", 8<<20)), 0o600)
	os.WriteFile(filepath.Join(cur, "lines.json"), textResult(lines("b")), 0o600)

	cmd := exec.Command(w.bp, "verify", c, "--json", "--", raw, "--reply", "--tools-pages", pages, "--result-dir", cur)
	var errs strings.Builder
	cmd.Stderr = &errs
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	peak, _ := runPeakRSS(cmd, 0)
	out := stdout.Bytes()
	if st, _ := statuses(t, string(out)); cmd.ProcessState.ExitCode() != 1 || st["one"] != "changed" || st["lines"] != "changed" {
		t.Fatalf("exit %d, %v; stderr %s", cmd.ProcessState.ExitCode(), st, errs.String())
	}
	t.Logf("stdout %d bytes, peak RSS %d MiB", len(out), peak>>20)
	if len(out) > 1<<20 {
		t.Errorf("stdout %d bytes for two calls, want at most 1 MiB", len(out))
	}
	if !strings.Contains(string(out), "bytes sha256:") || !strings.Contains(string(out), "the diff is clipped") {
		t.Errorf("no note of the clipping: %.300s", out)
	}
	// Two 8 MiB answers and their texts on both sides: 89 MiB.
	if peak > 256<<20 {
		t.Errorf("peak RSS %d MiB", peak>>20)
	}
}

// A cassette of 200 MB through a pipe (`verify <(…)`) is read once, as it comes,
// holding a line at a time: it is not gathered whole to be read twice. (VmHWM, read
// with the last line written and the pipe still open: ru_maxrss carries the test
// process's own peak, the exec'd child having shared its memory until exec.)
func TestVerifyCassetteFromAPipeIsBounded(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	header, rest, _ := strings.Cut(string(b), "\n")
	var call map[string]json.RawMessage
	for _, l := range strings.Split(rest, "\n") {
		if strings.Contains(l, `"tool":"greet"`) {
			json.Unmarshal([]byte(l), &call)
		}
	}
	if call == nil {
		t.Fatalf("no greet call in %s", b)
	}
	const calls, size = 50, 4 << 20
	delete(call, "seq")
	call["result"] = textResult(strings.Repeat("x", size))
	line, _ := json.Marshal(call) // {"seq":N, is put before its other members
	line = append(line[1:], '\n')

	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(w.bp, "verify", "/dev/fd/3", "--plan", "--json", "--", w.vs)
	cmd.ExtraFiles = []*os.File{r}
	var errs strings.Builder
	cmd.Stderr = &errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	peak := make(chan int64, 1)
	go func() {
		defer pw.Close()
		defer close(peak)
		if _, err := pw.WriteString(header + "\n"); err != nil {
			return
		}
		for i := 1; i <= calls; i++ {
			if _, err := pw.Write(append(fmt.Appendf(nil, `{"seq":%d,`, i), line...)); err != nil {
				return // verify has gone: its exit says why
			}
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		for l := range strings.SplitSeq(string(st), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok && err == nil {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				peak <- kb << 10
			}
		}
	}()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("verify did not end within 120s: %s", errs.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	hwm, ok := <-peak
	if !ok {
		t.Fatal("verify's VmHWM could not be read")
	}
	t.Logf("%d MB through a pipe: peak RSS %d MB", calls*size>>20, hwm>>20)
	if hwm > 96<<20 {
		t.Errorf("peak RSS %d MB for %d MB through a pipe, lines of %d MB", hwm>>20, calls*size>>20, size>>20)
	}
}
