package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Build compiles the main package at pkg (a module-relative path like
// "./cmd/bir-proxy" or "./testdata/rawserver") once per test process and
// returns the executable's path. Safe for concurrent use; fails tb on a build
// error.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	return builds.get(tb, pkg, false)
}

// BuildRace is Build with the race detector compiled in, for a program whose
// own concurrency a test means to check.
func BuildRace(tb testing.TB, pkg string) string {
	tb.Helper()
	return builds.get(tb, pkg, true)
}

// ModuleRoot returns the module's root directory (found from this file or by
// walking up to go.mod).
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatalf("testutil: %v", err)
	}
	return root
}

func moduleRoot() (string, error) {
	// This file sits two levels below the root; under -trimpath its recorded
	// name is not a real path, hence the walk from the working directory.
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root := filepath.Join(filepath.Dir(file), "..", "..")
		if isModuleRoot(root) {
			return filepath.Clean(root), nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding module root: %w", err)
	}
	for {
		if isModuleRoot(dir) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding module root: no go.mod above the working directory")
		}
		dir = parent
	}
}

func isModuleRoot(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// builds is the one piece of package state: a cache that lives as long as
// the test process, which is the point of building each program once.
var builds = buildCache{entries: map[string]*buildEntry{}}

type buildCache struct {
	mu      sync.Mutex
	dir     string // per-process output directory, made on first use
	entries map[string]*buildEntry
}

type buildEntry struct {
	// sub is the entry's own subdirectory of the output directory, so two
	// packages with the same base name (./cmd/x, ./testdata/x) keep that
	// name, which is what shows in ps and in the proxy's logs, without
	// overwriting each other.
	sub  string
	done chan struct{} // closed when exe or err is set
	exe  string
	err  error
}

func (c *buildCache) get(tb testing.TB, pkg string, race bool) string {
	tb.Helper()
	key := pkg
	if race {
		key += " -race"
	}
	c.mu.Lock()
	e, found := c.entries[key]
	if !found {
		e = &buildEntry{sub: strconv.Itoa(len(c.entries)), done: make(chan struct{})}
		c.entries[key] = e
	}
	c.mu.Unlock()

	if !found {
		e.exe, e.err = c.build(pkg, race, e.sub)
		close(e.done)
	}
	select {
	case <-e.done:
	case <-tb.Context().Done():
		tb.Fatalf("testutil: waiting for the build of %s: %v", pkg, tb.Context().Err())
	}
	if e.err != nil {
		tb.Fatalf("testutil: %v", e.err)
	}
	return e.exe
}

func (c *buildCache) build(pkg string, race bool, sub string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir, err := c.outputDir()
	if err != nil {
		return "", err
	}
	name := path.Base(strings.TrimSuffix(pkg, "/"))
	if name == "." || name == "/" {
		name = "main"
	}
	args := []string{"build"}
	if race {
		name += "-race"
		args = append(args, "-race")
	}
	exe := filepath.Join(dir, sub, name)
	args = append(args, "-o", exe, pkg)
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("building %s: no go command on PATH: %w", pkg, err)
	}
	// No context: the build serves every test waiting for it, each of which
	// stops waiting on its own context; go test's -timeout bounds the rest.
	cmd := exec.Command(goTool, args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(cmd.Args[1:], " "), err, out)
	}
	return exe, nil
}

// outputDir makes, once, a directory for this process's binaries. Its name
// carries the pid so a later run can remove those of processes that are gone:
// a test process cannot clean up after itself at exit.
func (c *buildCache) outputDir() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dir != "" {
		return c.dir, nil
	}
	removeStaleDirs()
	dir, err := os.MkdirTemp("", dirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", fmt.Errorf("making a directory for test binaries: %w", err)
	}
	c.dir = dir
	return dir, nil
}

const dirPrefix = "bir-testbin-"

func removeStaleDirs() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, m := range matches {
		rest := strings.TrimPrefix(filepath.Base(m), dirPrefix)
		pidText, _, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || Alive(pid) {
			continue
		}
		_ = os.RemoveAll(m)
	}
}

// ReadPidfile returns the pid a fixture wrote to path with --pidfile.
func ReadPidfile(tb testing.TB, path string) int {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("testutil: reading pidfile: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		tb.Fatalf("testutil: pidfile %s holds %q, not a pid", path, data)
	}
	return pid
}
