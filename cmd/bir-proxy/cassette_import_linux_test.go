package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// An import holds the file and what is made of it, not more: a 16 MiB result
// imported stays within a bound of the proxy's peak RSS.
func TestCassetteImportMemoryBound(t *testing.T) {
	w := newCallWorld(t)
	big := strings.Repeat("x", 16<<20)
	doc := strings.Replace(mcpRecorderCassette, `"text": "{\"message\": \"hi\"}"`, `"text": "`+big+`"`, 1)
	in := filepath.Join(w.dir, "big.json")
	os.WriteFile(in, []byte(doc), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.bp, "cassette", "import", "--from", "mcp-recorder", in, "-o", filepath.Join(w.dir, "big.jsonl"))
	var errs bytes.Buffer
	cmd.Stderr = &errs
	peak, err := runPeakRSS(cmd, 0)
	if err != nil {
		t.Fatalf("%v: %s", err, errs.String())
	}
	// The file, its interactions' raw copies, the call's clone, the line written and
	// the line read back: six copies at most, and the runtime's own.
	if limit := int64(6*len(doc) + 40<<20); peak > limit {
		t.Errorf("peak RSS %d MiB, bound %d MiB", peak>>20, limit>>20)
	}
	t.Logf("peak RSS %d MiB for a %d MiB file", peak>>20, len(doc)>>20)
}

// TestCassetteImportManyInteractionsMemoryBound: an mcp-recorder file of millions of
// small interactions is read one interaction at a time. Decoded whole, each "{}"
// became a struct of a hundred bytes and more: a 60 MB file took 7.6 GB.
func TestCassetteImportManyInteractionsMemoryBound(t *testing.T) {
	_, _ = isolate(t)
	bp := testutil.Build(t, "./cmd/bir-proxy")
	dir := t.TempDir()
	call := `{"type":"jsonrpc_request","request":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{}}},"response":{"jsonrpc":"2.0","id":1,"result":{"content":[]}}}`
	doc := `{"version":"1.0","metadata":{},"interactions":[` + strings.Repeat("{},", 3<<20) + call + `]}`
	in := filepath.Join(dir, "many.json")
	os.WriteFile(in, []byte(doc), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bp, "cassette", "import", "--from", "mcp-recorder", in, "-o", filepath.Join(dir, "many.jsonl"))
	var errs bytes.Buffer
	cmd.Stderr = &errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := int64(0)
	for ctx.Err() == nil {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
		_, v, ok := bytes.Cut(b, []byte("VmHWM:"))
		if err != nil || !ok {
			break
		}
		if kb, err := strconv.ParseInt(strings.Fields(string(v))[0], 10, 64); err == nil && kb<<10 > peak {
			peak = kb << 10
		}
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Wait(); err != nil || !strings.Contains(errs.String(), "1 calls written") {
		t.Fatalf("%v: %s", err, errs.String())
	}
	if limit := int64(4*len(doc) + 40<<20); peak > limit {
		t.Errorf("peak RSS %d MiB for a %d MiB file, bound %d MiB", peak>>20, len(doc)>>20, limit>>20)
	}
	t.Logf("peak RSS %d MiB for a %d MiB file", peak>>20, len(doc)>>20)
}
