package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func parse(t *testing.T, s string) *debug.BuildInfo {
	t.Helper()
	bi, err := debug.ParseBuildInfo(s)
	if err != nil {
		t.Fatalf("ParseBuildInfo: %v", err)
	}
	return bi
}

// TestString: the version line names what the toolchain recorded, and says "dev" and
// "dirty" only when the build was one (the build-info texts are what `go version -m`
// prints for each kind of build).
func TestString(t *testing.T) {
	const rev = "b5878d3c0ffee0123456789abcdef0123456789a"
	for _, tc := range []struct {
		name, info, want string
	}{
		{"go install module@version", "go\tgo1.26.8\npath\tgithub.com/bir-dev/bir-proxy/cmd/bir-proxy\nmod\tgithub.com/bir-dev/bir-proxy\tv0.2.0\th1:abc=\nbuild\tGOARCH=arm64\nbuild\tGOOS=darwin\n",
			"v0.2.0 (go1.26.8, darwin/arm64)"},
		{"go build at a tag", "go\tgo1.26.8\npath\tgithub.com/bir-dev/bir-proxy/cmd/bir-proxy\nmod\tgithub.com/bir-dev/bir-proxy\tv0.2.0\t\nbuild\tGOARCH=amd64\nbuild\tGOOS=linux\nbuild\tvcs=git\nbuild\tvcs.revision=" + rev + "\nbuild\tvcs.modified=false\n",
			"v0.2.0 (rev b5878d3, go1.26.8, linux/amd64)"},
		{"go build between tags", "go\tgo1.26.8\npath\tgithub.com/bir-dev/bir-proxy/cmd/bir-proxy\nmod\tgithub.com/bir-dev/bir-proxy\tv0.2.1-0.20261201235436-b5878d3c0ffe\t\nbuild\tGOARCH=amd64\nbuild\tGOOS=windows\nbuild\tvcs=git\nbuild\tvcs.revision=" + rev + "\nbuild\tvcs.modified=false\n",
			"v0.2.1-0.20261201235436-b5878d3c0ffe (rev b5878d3, go1.26.8, windows/amd64)"},
		{"go build of a changed tree", "go\tgo1.26.8\npath\tgithub.com/bir-dev/bir-proxy/cmd/bir-proxy\nmod\tgithub.com/bir-dev/bir-proxy\tv0.0.0-20261201235436-b5878d3c0ffe+dirty\t\nbuild\tGOARCH=amd64\nbuild\tGOOS=linux\nbuild\tvcs=git\nbuild\tvcs.revision=" + rev + "\nbuild\tvcs.modified=true\n",
			"v0.0.0-20261201235436-b5878d3c0ffe+dirty (rev b5878d3, dirty, go1.26.8, linux/amd64)"},
		{"go run, or -buildvcs=false", "go\tgo1.26.8\npath\tgithub.com/bir-dev/bir-proxy/cmd/bir-proxy\nmod\tgithub.com/bir-dev/bir-proxy\t(devel)\t\nbuild\tGOARCH=amd64\nbuild\tGOOS=linux\n",
			"dev (go1.26.8, linux/amd64)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FromBuildInfo(parse(t, tc.info)).String(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestGet: the test binary has build info but no module version and no VCS stamp: it
// is "dev", never "dirty", built by this toolchain for this target.
func TestGet(t *testing.T) {
	in := Get()
	want := "dev (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if got := in.String(); got != want {
		t.Errorf("Get().String() = %q, want %q", got, want)
	}
	if strings.Contains(in.String(), "dirty") {
		t.Errorf("a test binary says dirty: %q", in)
	}
}
