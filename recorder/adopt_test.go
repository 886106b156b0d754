package recorder

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// TestMain runs the tests (failing a run that leaks a goroutine) or, in a child this
// test binary started, spoolHelper.
func TestMain(m *testing.M) {
	testutil.MainWithHelpers(m, map[string]func([]string) int{"spool": spoolHelper})
}

// spoolHelper is a tiny proxy run in its own process, so that a test can SIGKILL it. It
// opens a Reporter and then obeys lines on stdin:
//
//	submit N     submit N reports; answers "committed TOTAL" once they are on disk
//	delivered N  answers "delivered" once the recorder has acknowledged N reports
//
// It starts by printing "id PROXYID" and never exits by itself. Its arguments are the
// recorder's URL and token and the state directory.
func spoolHelper(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: spool URL TOKEN STATEDIR")
		return 2
	}
	committed, delivered := newCounter(), newCounter()
	cfg := Config{
		Endpoint: &Endpoint{URL: args[0], Token: args[1], Source: "test"},
		Server:   "github",
		PID:      os.Getpid(),
		StateDir: args[2],
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, nil)),
		tuning:   fastTuning(),
	}
	cfg.tuning.hooks.committed = committed.add
	cfg.tuning.hooks.attempt = func(path string, status int, _ error) {
		if path == "/proxy/step" && status == 200 {
			delivered.add(1)
		}
	}
	ctx := context.Background()
	r, err := Open(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("id %s\n", r.ProxyID())
	total := 0
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		n, _ := strconv.Atoi(arg)
		switch cmd {
		case "submit":
			for range n {
				total++
				r.Submit(recordertest.SampleStep("helper_tool", total))
			}
			committed.wait(ctx, total)
			fmt.Printf("committed %d\n", total)
		case "delivered":
			delivered.wait(ctx, n)
			fmt.Println("delivered")
		}
	}
	select {} // wait for SIGKILL
}

type helperProc struct {
	*testutil.Proc
	t *testing.T
}

func startHelper(t *testing.T, rec *recordertest.Server, state string) *helperProc {
	return &helperProc{Proc: testutil.Start(t, testutil.HelperCommand(t, "spool", rec.URL(), rec.Token(), state)), t: t}
}

// ask sends line (none if empty) and returns the helper's next line.
func (h *helperProc) ask(line string) string {
	h.t.Helper()
	if line != "" {
		h.Send(line)
	}
	return strings.TrimSuffix(h.ReadLine(), "\n")
}

// A proxy SIGKILLed with reports not yet delivered: while it lives, nobody takes its
// spool; once it is dead, the next run of the same server delivers exactly the reports
// it had not got acknowledged, under its proxyId and seqs, and deletes its file.
func TestSpoolOfKilledProxyIsAdopted(t *testing.T) {
	ctx := testutil.Context(t)
	rec := recordertest.Start(t)
	state := t.TempDir()
	helper := startHelper(t, rec, state)
	oldID, ok := strings.CutPrefix(helper.ask(""), "id ")
	if !ok {
		t.Fatalf("helper said %q", oldID)
	}
	if got := helper.ask("submit 5"); got != "committed 5" {
		t.Fatalf("helper said %q", got)
	}
	if got := helper.ask("delivered 5"); got != "delivered" {
		t.Fatalf("helper said %q", got)
	}
	rec.Down()
	if got := helper.ask("submit 5"); got != "committed 10" {
		t.Fatalf("helper said %q", got)
	}
	oldFile := filepath.Join(spoolDir(state), spoolName("github", oldID))

	// Its owner is alive: a second proxy of the same server leaves the file alone.
	bystander, err := Open(ctx, recorderConfig(t, rec, state))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Recv(t, bystander.adoptDone, "the bystander's adoption pass")
	if len(bystander.adopted) != 0 {
		t.Errorf("adopted %v while their proxy still runs", bystander.adopted)
	}
	if err := bystander.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if reports, acks := spoolLines(t, oldFile); reports != 10 || acks != 5 {
		t.Fatalf("live proxy's spool has %d reports, %d done marks; want 10, 5", reports, acks)
	}

	if err := helper.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	helper.Wait()
	// A write cut short by the kill.
	f, err := os.OpenFile(oldFile, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `{"proxyId":%q,"server":"github","seq":11,"tool":"helper_tool","args":{"i":`, oldID)
	f.Close()

	if err := rec.Up(); err != nil {
		t.Fatal(err)
	}
	next := open(t, recorderConfig(t, rec, state))
	testutil.Recv(t, next.adoptDone, "the next run's adoption pass")
	if len(next.adopted) != 1 || next.adopted[0] != oldID {
		t.Fatalf("adopted %v, want [%s]", next.adopted, oldID)
	}
	steps := waitSeqs(t, ctx, rec, oldID, 10) // 1-5 from the helper, 6-10 adopted, not the torn 11
	if d := rec.Duplicates(); d != 0 {
		t.Errorf("%d acknowledged reports were sent again", d)
	}
	for _, s := range steps[5:] {
		if s.Tool != "helper_tool" || s.Get("args.i").Int() != int64(s.Seq) {
			t.Errorf("adopted report changed on the way: %s", s.Body)
		}
	}
	adoptedReg := false
	for _, reg := range rec.Registrations() {
		if reg.ProxyID == oldID && reg.PID == os.Getpid() && reg.Server == "github" {
			adoptedReg = true
		}
	}
	if !adoptedReg {
		t.Error("the old proxyId was not registered by the adopting run")
	}
	if err := next.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if left := spoolFiles(t, state); len(left) != 0 {
		t.Errorf("spool files left: %v", left)
	}
}
