package mcpconfig

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tidwall/gjson"
)

// TestProjectKeyNearest: a session started in a subdirectory uses the
// project whose path encloses it most closely, as Claude Code does.
func TestProjectKeyNearest(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("unix paths")
	}
	projects := gjson.Parse(`{
		"/home/u": {},
		"/home/u/work/app": {},
		"/home/u/work/app/packages/api/": {},
		"/home/u/work/application": {},
		"": {}
	}`)
	for dir, want := range map[string]string{
		"/home/u/work/app":                  "/home/u/work/app",
		"/home/u/work/app/src":              "/home/u/work/app",
		"/home/u/work/app/packages/api":     "/home/u/work/app/packages/api/",
		"/home/u/work/app/packages/api/x/y": "/home/u/work/app/packages/api/",
		"/home/u/work/app/packages":         "/home/u/work/app",
		"/home/u/work/applications":         "/home/u", // a shared prefix is not a parent
		"/home/u/work":                      "/home/u",
		"/home/other":                       "",
		"/":                                 "",
	} {
		got, ok := projectKey(projects, dir)
		if got != want || ok != (want != "") {
			t.Errorf("%s: got %q %v, want %q", dir, got, ok, want)
		}
	}
}

func TestFindProjectFile(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "app", "src", "lib")
	if err := os.MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	if path, ok := FindProjectFile(deep); ok {
		t.Fatalf("found %s where there is none", path)
	} else if path != filepath.Join(deep, ProjectFile) {
		t.Errorf("without a file: %s", path)
	}
	// A directory named .mcp.json is not the file.
	if err := os.Mkdir(filepath.Join(root, "app", "src", ProjectFile), 0o700); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(root, "app", ProjectFile)
	if err := os.WriteFile(want, []byte(`{"mcpServers":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{deep, filepath.Join(root, "app")} {
		if got, ok := FindProjectFile(dir); !ok || got != want {
			t.Errorf("from %s: %s %v, want %s", dir, got, ok, want)
		}
	}
	if loc, ok := Locate(ScopeProject, deep, "/cj"); !ok || loc.File != want {
		t.Errorf("Locate: %+v %v", loc, ok)
	}
}
