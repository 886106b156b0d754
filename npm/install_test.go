// The test installs the npm packages scripts/release makes from this directory the way
// a user gets them: by npm from the tarballs, run through the launcher on a PATH with
// node and no Go. It sits beside what it tests (the package templates and
// bin/bir-proxy.js), in a package of its own so that `go test ./npm/` runs it alone
// and cmd/bir-proxy's test binary does not build a release.

package npm_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) { testutil.Main(m) }

// The Go target's name in Node's words, as the platform packages are named.
var nodeOS = map[string]string{"linux": "linux", "darwin": "darwin", "windows": "win32"}
var nodeCPU = map[string]string{"amd64": "x64", "arm64": "arm64"}

// TestInstallFromTarballs builds the host's release with `scripts/release
// --only-host`, installs bir-proxy-VERSION.tgz and bir-proxy-OS-CPU-VERSION.tgz with
// npm from the files alone (--offline: the other five optional dependencies cannot be
// fetched and are skipped, as npm skips them on a foreign platform), and runs the
// installed command with PATH holding node (npm, npx, sh for npx) and no Go: --version,
// an exit code passed through, and a SIGTERM to the launcher reaching the binary.
func TestInstallFromTarballs(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the PATH of symlinks and the signal check are Unix-only; Windows runs bin/bir-proxy.js the same way")
	}
	cpu, ok := nodeCPU[runtime.GOARCH]
	if nodeOS[runtime.GOOS] == "" || !ok {
		t.Skipf("no npm package for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	host := nodeOS[runtime.GOOS] + "-" + cpu
	tools := map[string]string{}
	for _, name := range []string{"node", "npm", "npx", "git", "sh"} {
		p, err := exec.LookPath(name)
		if err != nil {
			if testutil.InCI() || name == "git" || name == "sh" {
				t.Fatalf("%s is needed: %v", name, err)
			}
			t.Skipf("%s is not installed: %v", name, err)
		}
		tools[name] = p
	}
	root := testutil.ModuleRoot(t)
	tmp := t.TempDir()
	out, prefix, home, bin := filepath.Join(tmp, "dist"), filepath.Join(tmp, "prefix"), filepath.Join(tmp, "home"), filepath.Join(tmp, "path")
	for _, d := range []string{prefix, home, bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// scripts/release builds a commit, not the tree: `git stash create` makes one of the
	// tree's tracked files as they are (empty when nothing changed), so an edit is
	// tested before it is committed. It names no ref and moves nothing.
	ref := "HEAD"
	if s, err := exec.Command("git", "-C", root, "stash", "create").Output(); err != nil {
		t.Fatalf("git stash create: %v", err)
	} else if s := strings.TrimSpace(string(s)); s != "" {
		ref = s
	}
	// One build of the binary: a deadline well above a cold build on two loaded cores.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	run(t, ctx, nil, filepath.Join(root, "scripts", "release"), "--only-host", "-o", out, ref)
	t.Logf("scripts/release --only-host %s: %v", ref, time.Since(start).Round(time.Millisecond))

	mains, _ := filepath.Glob(filepath.Join(out, "bir-proxy-[0-9]*.tgz"))
	plats, _ := filepath.Glob(filepath.Join(out, "bir-proxy-"+host+"-*.tgz"))
	if len(mains) != 1 || len(plats) != 1 {
		t.Fatalf("want one bir-proxy-VERSION.tgz and one bir-proxy-%s-VERSION.tgz in %s, got %q and %q", host, out, mains, plats)
	}
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(mains[0]), "bir-proxy-"), ".tgz")
	if filepath.Base(plats[0]) != "bir-proxy-"+host+"-"+version+".tgz" {
		t.Fatalf("the platform tarball %s is not of version %s", filepath.Base(plats[0]), version)
	}
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{mains[0], plats[0]} {
		if !bytes.Contains(sums, []byte("  "+filepath.Base(f)+"\n")) {
			t.Errorf("SHA256SUMS does not list %s:\n%s", filepath.Base(f), sums)
		}
	}

	// No registry: the cache is empty and npm may not go out for what it lacks.
	npmEnv := []string{"HOME=" + home, "npm_config_cache=" + filepath.Join(tmp, "npm-cache"),
		"npm_config_update_notifier=false", "npm_config_userconfig=" + filepath.Join(home, ".npmrc")}
	ictx, icancel := context.WithTimeout(context.Background(), testutil.Guard)
	defer icancel()
	run(t, ictx, append(npmEnv, "PATH="+os.Getenv("PATH")), tools["npm"], "install", "--prefix", prefix,
		"--offline", "--no-audit", "--no-fund", "--ignore-scripts", mains[0], plats[0])

	// The PATH a host would give: node and what npx needs, no Go.
	for _, name := range []string{"node", "npm", "npx", "sh"} {
		if err := os.Symlink(tools[name], filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	env := append(npmEnv, "PATH="+bin)
	want := "bir-proxy v" + version + " ("
	installed := filepath.Join(prefix, "node_modules", ".bin", "bir-proxy")
	if got := run(t, ictx, env, installed, "--version"); !strings.HasPrefix(got, want) {
		t.Errorf("%s --version = %q, want %q...", installed, got, want)
	}
	npx := []string{"--prefix", prefix, "--offline", "bir-proxy", "--version"}
	if got := run(t, ictx, env, filepath.Join(bin, "npx"), npx...); !strings.HasPrefix(got, want) {
		t.Errorf("npx %s = %q, want %q...", strings.Join(npx, " "), got, want)
	}

	// An exit code is the binary's: a usage error is 2 from both.
	native := filepath.Join(prefix, "node_modules", "@bir-proxy", host, "bin", "bir-proxy")
	direct, viaNPM := exitCode(t, ictx, env, native, "--no-such-flag"), exitCode(t, ictx, env, installed, "--no-such-flag")
	if direct == 0 || viaNPM != direct {
		t.Errorf("--no-such-flag: the binary exits %d, through the launcher %d", direct, viaNPM)
	}

	// SIGTERM to the launcher (the pid a host knows) reaches the binary, which stops its
	// server and ends: the host's stdout, which the binary holds too, reaches EOF. A
	// launcher that only died of it would leave the binary running with it open.
	cmd := exec.Command(installed, "--server", "npmtest", "--",
		tools["node"], "-e", `process.stderr.write("npmtest-up\n"); setInterval(() => {}, 1000)`)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eof := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, stdout); eof <- err }()
	exited := make(chan error, 1)
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	}()
	// The server is up, so the launcher has long had its handlers.
	if err := stderr.WaitFor(ictx, "npmtest-up"); err != nil {
		t.Fatalf("the server did not start: %v; stderr:\n%s", err, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := testutil.Recv(t, eof, "EOF on the launcher's stdout after SIGTERM (the binary still running?)"); err != nil {
		t.Fatal(err)
	}
	go func() { exited <- cmd.Wait() }()
	err = testutil.Recv(t, exited, "the launcher to exit")
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "stopping the server") {
		t.Errorf("the binary did not stop on the forwarded SIGTERM; stderr:\n%s", stderr.String())
	}
	t.Logf("after SIGTERM the launcher ended with %v", cmd.ProcessState)
}

// run runs name with args (env, when not nil, as the whole environment) and returns
// its stdout, failing t with its stderr when it fails.
func run(t *testing.T, ctx context.Context, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = env
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// exitCode runs name with args and returns its exit code.
func exitCode(t *testing.T, ctx context.Context, env []string, name string, args ...string) int {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s: %v", name, err)
	}
	return cmd.ProcessState.ExitCode()
}
