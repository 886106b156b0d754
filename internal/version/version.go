// Package version says which bir-proxy this is, from what the Go toolchain stamped into
// the binary (debug.ReadBuildInfo): the module version, the VCS revision it was built
// from and whether the tree had uncommitted changes, the Go version and the target.
// Nothing is set by hand (no -ldflags -X): `go install module@v0.2.0`, `go build` in a
// clone and scripts/release all get the version the toolchain knows, and a binary says
// "dev" or "dirty" only when it is.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is what a binary knows about its own build.
type Info struct {
	// Module is the main module's version: a tag (v0.2.0), a pseudo-version
	// (v0.0.0-20261201235436-b5878d3abcde) for an untagged commit, with "+dirty" when
	// the tree had changes, or "" when the toolchain recorded none ("(devel)": go run,
	// a test binary, a build outside a repository or with -buildvcs=false).
	Module string
	// Revision is the VCS commit the binary was built from, "" when not recorded.
	Revision string
	// Modified is true when the working tree had uncommitted changes.
	Modified bool
	Go       string // go1.26.8
	OS, Arch string // the target, runtime.GOOS and runtime.GOARCH
}

// Get reads the running binary's build information.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	}
	return FromBuildInfo(bi)
}

// FromBuildInfo is Get for a given build: bi as debug.ReadBuildInfo or
// debug.ParseBuildInfo returns it (for `go version -m` output, and tests).
func FromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Go: bi.GoVersion, OS: runtime.GOOS, Arch: runtime.GOARCH}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		in.Module = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		case "GOOS":
			in.OS = s.Value
		case "GOARCH":
			in.Arch = s.Value
		}
	}
	if in.Go == "" {
		in.Go = runtime.Version()
	}
	return in
}

// String is the version line's words after "bir-proxy":
//
//	v0.2.0 (rev b5878d3, go1.26.8, linux/amd64)
//	v0.0.0-20261201235436-b5878d3abcde+dirty (rev b5878d3, dirty, go1.26.8, linux/amd64)
//	dev (go1.26.8, linux/amd64)
//
// "dev" is said only when the toolchain recorded no module version, "dirty" only when
// it recorded uncommitted changes.
func (in Info) String() string {
	var b strings.Builder
	if in.Module != "" {
		b.WriteString(in.Module)
	} else {
		b.WriteString("dev")
	}
	b.WriteString(" (")
	if in.Revision != "" {
		b.WriteString("rev ")
		b.WriteString(short(in.Revision))
		b.WriteString(", ")
	}
	if in.Modified {
		b.WriteString("dirty, ")
	}
	b.WriteString(in.Go)
	b.WriteString(", ")
	b.WriteString(in.OS)
	b.WriteByte('/')
	b.WriteString(in.Arch)
	b.WriteByte(')')
	return b.String()
}

// short is the first 7 characters of a commit hash, the abbreviation git shows.
func short(rev string) string {
	if len(rev) > 7 {
		return rev[:7]
	}
	return rev
}
