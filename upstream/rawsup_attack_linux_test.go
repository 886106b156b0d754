//go:build linux && amd64

package upstream

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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
