//go:build linux && amd64

package upstream

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// rawStart starts sh -c script under the forked supervisor (no Go code in it).
func rawStart(t *testing.T, dir, script string, env []string) *Process {
	t.Helper()
	if !canForkSupervisor() {
		t.Skip("no /proc/thread-self/children")
	}
	p, err := Start(Command{Path: "/bin/sh", Args: []string{"-c", script}, Env: env, Dir: dir,
		Name: "sh", Stderr: io.Discard, Supervisor: "unused: the forked supervisor runs no program"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func waitExited(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the supervised server did not end")
	}
}

// A server that dies of a core-dumping signal: the supervisor passes the signal on by
// dying of it too, and a supervisor that shares the proxy's memory must not dump it
// (the proxy's whole heap, the recorder's token with it, into the server's directory
// or the system's crash collector, which pipes ignore RLIMIT_CORE for).
func TestRawSupervisorDumpsNoCoreOfTheProxy(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_CORE, &old); err != nil {
		t.Fatal(err)
	}
	if old.Max < 1<<30 {
		t.Skip("RLIMIT_CORE's hard limit too low to show a dump")
	}
	raised := syscall.Rlimit{Cur: old.Max, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_CORE, &raised); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_CORE, &old)
	dir := t.TempDir()
	// The server itself dumps nothing, so whatever dump appears is the supervisor's.
	p := rawStart(t, dir, "ulimit -c 0; kill -SEGV $$", os.Environ())
	waitExited(t, p)
	ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGSEGV {
		t.Fatalf("the supervisor's status %v: not the server's SIGSEGV", ws)
	}
	if p.exitCode != 128+int(syscall.SIGSEGV) {
		t.Fatalf("exit code %d", p.exitCode)
	}
	if ws.CoreDump() {
		t.Errorf("the supervisor dumped core: the proxy's memory")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "core") {
			fi, _ := e.Info()
			t.Errorf("a core file %s of %d bytes in the server's directory", e.Name(), fi.Size())
		}
	}
}

const stateScript = `ls /proc/self/fd > state; grep '^Sig\|^Shd' /proc/self/status >> state; env | sort >> state; pwd >> state; cat /proc/$$/limits | grep -v core >> state`

// The server starts as a plain exec would start it: fds 0, 1, 2 only, nothing
// blocked, the same dispositions, environment and directory.
func TestRawSupervisorServerStartsAsAPlainExec(t *testing.T) {
	env := []string{"PATH=" + os.Getenv("PATH"), "A=1", "B=two words", "EMPTY="}
	rawDir := t.TempDir()
	p := rawStart(t, rawDir, stateScript, env)
	waitExited(t, p)
	if p.exitCode != 0 {
		t.Fatalf("exit code %d", p.exitCode)
	}
	plainDir := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", stateScript)
	cmd.Env, cmd.Dir = env, plainDir
	r, w, _ := os.Pipe()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, w, w
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	w.Close()
	got, _ := os.ReadFile(filepath.Join(rawDir, "state"))
	want, _ := os.ReadFile(filepath.Join(plainDir, "state"))
	// Its fds: 0, 1, 2 and ls's own 3. Not compared with the plain exec's, which
	// passes on whatever the test process inherited without close-on-exec.
	fds, rest, _ := strings.Cut(string(got), "SigQ")
	if fds != "0\n1\n2\n3\n" {
		t.Errorf("the server's fds (ls's 3 included): %q", fds)
	}
	_, wrest, _ := strings.Cut(string(want), "SigQ")
	// SigQ's value (what follows the cut, to the line's end) is the signals queued for
	// the user across all of its processes: with other processes about (a loaded CI
	// run's tests, each taking Go's preemption signals), it differs between two reads.
	_, rest, _ = strings.Cut(rest, "\n")
	_, wrest, _ = strings.Cut(wrest, "\n")
	got, want = []byte(rest), []byte(wrest)
	g := strings.ReplaceAll(string(got), rawDir, "DIR")
	w2 := strings.ReplaceAll(string(want), plainDir, "DIR")
	if g != w2 {
		t.Fatalf("the server's state under the supervisor:\n%s\nunder a plain exec:\n%s", g, w2)
	}
}

// Servers start and end while the collector runs all the time: what the supervisor
// reads must stay where it is until it has exited.
func TestRawSupervisorUnderGC(t *testing.T) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
				_ = make([]byte, 64<<10)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	var sw sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 4; g++ {
		sw.Add(1)
		go func() {
			defer sw.Done()
			for i := 0; i < 10; i++ {
				p, err := Start(Command{Path: "/bin/sh", Args: []string{"-c", "exit 7"}, Env: []string{"X=" + strings.Repeat("x", 1000)},
					Name: "sh", Stderr: io.Discard, Supervisor: "unused"})
				if err != nil {
					errs <- err.Error()
					return
				}
				<-p.exited
				if p.exitCode != 7 {
					errs <- p.ExitReason()
				}
				p.Close()
			}
		}()
	}
	sw.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// A server whose exec fails after the proxy's look-up: the supervisor ends with a
// shell's status for it, 126 (found, not runnable) or 127 (not found).
func TestRawSupervisorFailedExec(t *testing.T) {
	if !canForkSupervisor() {
		t.Skip("no /proc/thread-self/children")
	}
	dir := t.TempDir()
	noShebang := filepath.Join(dir, "noshebang")
	noInterp := filepath.Join(dir, "nointerp")
	os.WriteFile(noShebang, []byte("echo hi\n"), 0o755)
	os.WriteFile(noInterp, []byte("#!/nonexistent/interp\n"), 0o755)
	for _, c := range []struct {
		path string
		code int
	}{{noShebang, 126}, {noInterp, 127}} {
		p, err := Start(Command{Path: c.path, Name: "x", Stderr: io.Discard, Supervisor: "unused"})
		if err != nil {
			t.Fatal(err)
		}
		waitExited(t, p)
		if p.exitCode != c.code {
			t.Errorf("%s: exit code %d (%s), want %d", c.path, p.exitCode, p.ExitReason(), c.code)
		}
		if _, err := p.Read(); err == nil {
			t.Errorf("%s: a message from a server that never ran", c.path)
		}
		p.Close()
	}
}

// The supervisor's kill pass reads its children's pids 4096 bytes at a time: a pid cut
// off at the end of the read must not be taken as the pid its first digits make, a
// process outside the server's tree. The canary is put at that pid (ns_last_pid, as
// root) and must survive the server's end. It holds because the kernel hands out only
// whole records while the read is the size of its page-sized buffer: a smaller read
// would cut one.
func TestRawSupervisorKillsNoTruncatedPid(t *testing.T) {
	if !canForkSupervisor() {
		t.Skip("no /proc/thread-self/children")
	}
	if os.Getuid() != 0 {
		t.Skip("placing the canary's pid takes root (ns_last_pid)")
	}
	const n = 1200
	dir := t.TempDir()
	script := `i=0; while [ $i -lt ` + strconv.Itoa(n) + ` ]; do sleep 1000 & echo $! >> pids; i=$((i+1)); done; echo done >> pids; while [ ! -e go ]; do sleep 0.05; done`
	// Five-digit pids for the children, so the cut falls after four digits.
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte("20000"), 0); err != nil {
		t.Skip(err)
	}
	p := rawStart(t, dir, script, os.Environ())
	var pids []string
	testutil.Eventually(t, "the server to start its children", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "pids"))
		pids = strings.Fields(strings.TrimSuffix(string(b), "done\n"))
		return strings.HasSuffix(string(b), "done\n")
	})
	list := strings.Join(pids, " ") + " "
	if len(list) <= 4096 || list[4095] == ' ' || list[4096] == ' ' {
		t.Skipf("the children list (%d bytes) is not cut inside a pid", len(list))
	}
	cut := list[:4096]
	frag, _ := strconv.Atoi(cut[strings.LastIndexByte(cut, ' ')+1:])
	if frag < 300 {
		t.Skipf("the cut pid's first digits, %d, are below pid 300", frag)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(frag)); err == nil {
		t.Skipf("pid %d is taken", frag)
	}
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(frag-1)), 0); err != nil {
		t.Skip(err)
	}
	canary := exec.Command("sleep", "1000")
	if err := canary.Start(); err != nil {
		t.Fatal(err)
	}
	defer canary.Wait()
	defer canary.Process.Kill()
	if canary.Process.Pid != frag {
		t.Skipf("the canary got pid %d, not %d", canary.Process.Pid, frag)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExited(t, p)
	var ws syscall.WaitStatus
	if got, _ := syscall.Wait4(frag, &ws, syscall.WNOHANG, nil); got == frag {
		t.Fatalf("the canary at pid %d, the first digits of a server's child's pid, was killed: %v", frag, ws)
	}
	for _, s := range pids {
		pid, _ := strconv.Atoi(s)
		if err := syscall.Kill(pid, 0); err == nil {
			if b, _ := os.ReadFile("/proc/" + s + "/stat"); strings.Contains(string(b), "(sleep)") && !strings.Contains(string(b), ") Z ") {
				t.Errorf("the server's child %d outlived the supervisor", pid)
			}
		}
	}
}

// A chain of descendants, each the parent of the next: the supervisor's kill pass
// sees one level at a time (a process is reparented to it only when its parent has
// died), and must still end a deep chain within its bound.
func TestRawSupervisorEndsADeepChain(t *testing.T) {
	if testing.Short() {
		t.Skip("4000 processes")
	}
	// The bound is 2 s of passes, a level a pass. On an idle machine a level takes
	// ~0.25 ms (a chain of 4,000 ends in ~1 s; a 1 ms sleep a pass let 29 of 4,000
	// outlive it), but a level waits for the killed process to get a CPU: with every
	// package's tests at once (CI) 2 of 4,001 outlived the bound, with three busy
	// loops on two CPUs up to 3,028. 2,000 is deep, and leaves that room.
	const depth = 2000
	dir := t.TempDir()
	chain := `n=$1; if [ "$n" -gt 0 ]; then sh ./chain $((n-1)) & fi; echo $$ >> pids; exec sleep 1000`
	if err := os.WriteFile(filepath.Join(dir, "chain"), []byte(chain), 0o644); err != nil {
		t.Fatal(err)
	}
	p := rawStart(t, dir, `sh ./chain `+strconv.Itoa(depth)+` & while [ $(wc -l < pids 2>/dev/null || echo 0) -le `+strconv.Itoa(depth)+` ]; do sleep 0.05; done`, os.Environ())
	// Starting 4,000 shells one after another takes longer than waitExited's bound on
	// a busy machine (CI runs every package at once): the bound is the supervisor's,
	// so it starts once the chain is whole.
	testutil.Eventually(t, "the whole chain started", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "pids"))
		return strings.Count(string(b), "\n") > depth
	})
	waitExited(t, p)
	b, _ := os.ReadFile(filepath.Join(dir, "pids"))
	var alive []string
	for _, s := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(s)
		st, err := os.ReadFile("/proc/" + s + "/stat")
		if err == nil && !strings.Contains(string(st), ") Z ") {
			alive = append(alive, s)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if len(alive) > 0 {
		t.Fatalf("%d of a chain of %d outlived the supervisor", len(alive), depth+1)
	}
}
