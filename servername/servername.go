// Package servername derives a server's name from the command line that runs it:
// the --server default of the proxy, and the name wrap gives an entry's reports.
package servername

import (
	"path"
	"strings"
)

// Default is the --server default: the name of what the command
// runs rather than of the launcher that runs it, so that reports from
// `npx -y @modelcontextprotocol/server-github` say "server-github" and not
// "npx" (which every other npm server would share). It is never empty and
// never holds a path separator.
func Default(argv []string) string {
	if name := launchedName(argv, 0); name != "" {
		return name
	}
	if len(argv) > 0 {
		if name := programName(argv[0]); name != "" {
			return name
		}
	}
	return "server"
}

// maxLaunchers bounds how many launchers deep launchedName looks (`cmd /c
// npx ...`, `uv run python -m ...`): a command line is finite, but a fuzzer
// can nest `env env env ...` for as long as it likes.
const maxLaunchers = 8

// launchedName names what argv runs: a launcher's package, script, module
// or image, or else the program itself. "" when argv names nothing usable.
func launchedName(argv []string, depth int) string {
	if len(argv) == 0 || depth > maxLaunchers {
		return ""
	}
	prog := strings.ToLower(programName(argv[0]))
	rest := argv[1:]
	sub := ""
	if len(rest) > 0 {
		sub = rest[0]
	}
	switch {
	case prog == "cmd": // cmd /c npx ... (Claude Desktop on Windows)
		for len(rest) > 0 && strings.HasPrefix(rest[0], "/") {
			rest = rest[1:]
		}
		return launchedName(rest, depth+1)
	case prog == "env":
		for len(rest) > 0 && (strings.HasPrefix(rest[0], "-") || strings.Contains(rest[0], "=")) {
			if rest[0] == "-u" && len(rest) > 1 {
				rest = rest[1:]
			}
			rest = rest[1:]
		}
		return launchedName(rest, depth+1)
	case prog == "sh" || prog == "bash" || prog == "zsh":
		if sub == "-c" && len(rest) > 1 {
			return launchedName(strings.Fields(rest[1]), depth+1)
		}
		return scriptName(positional(rest, nil))
	case prog == "npx" || prog == "bunx" || prog == "pnpx":
		return packageRun(rest, npxValueFlags)
	case (prog == "pnpm" || prog == "yarn") && sub == "dlx",
		prog == "pnpm" && sub == "exec",
		prog == "npm" && (sub == "exec" || sub == "x"),
		prog == "bun" && sub == "x":
		return packageRun(rest[1:], npxValueFlags)
	case prog == "uvx" || prog == "pipx" && sub == "run":
		if prog == "pipx" {
			rest = rest[1:]
		}
		return packageRun(rest, uvxValueFlags)
	case prog == "uv" && sub == "tool" && len(rest) > 1 && rest[1] == "run":
		return packageRun(rest[2:], uvxValueFlags)
	case prog == "uv" && sub == "run":
		return launchedCommand(rest[1:], uvRunValueFlags, depth)
	case isPython(prog):
		for i := 0; i < len(rest); i++ {
			switch a := rest[i]; {
			case a == "-m" && i+1 < len(rest):
				return moduleName(rest[i+1])
			case strings.HasPrefix(a, "-m") && len(a) > 2:
				return moduleName(a[2:])
			case a == "-c":
				return ""
			case pythonValueFlags[a]:
				i++
			case !strings.HasPrefix(a, "-"):
				return scriptName(a)
			}
		}
		return ""
	case prog == "node" || prog == "tsx" || prog == "ts-node" || prog == "bun" && (sub == "run" || !strings.HasPrefix(sub, "-")):
		if prog == "bun" && sub == "run" {
			rest = rest[1:]
		}
		return scriptName(positional(rest, nodeValueFlags))
	case prog == "deno":
		if sub == "run" {
			rest = rest[1:]
		}
		return scriptName(positional(rest, denoValueFlags))
	case prog == "docker" || prog == "podman":
		i := 0
		for i < len(rest) && strings.HasPrefix(rest[i], "-") { // global flags
			if dockerGlobalValueFlags[rest[i]] {
				i++
			}
			i++
		}
		if i < len(rest) && (rest[i] == "run" || rest[i] == "create") {
			return imageName(positional(rest[i+1:], dockerRunValueFlags))
		}
		if i+1 < len(rest) && rest[i] == "container" && rest[i+1] == "run" {
			return imageName(positional(rest[i+2:], dockerRunValueFlags))
		}
		return ""
	case prog == "java":
		for i := 0; i < len(rest); i++ {
			switch a := rest[i]; {
			case a == "-jar" && i+1 < len(rest):
				return scriptName(rest[i+1])
			case a == "-cp" || a == "-classpath" || a == "--class-path" || a == "-p" || a == "--module-path":
				i++
			case !strings.HasPrefix(a, "-"):
				return moduleName(a)
			}
		}
		return ""
	case prog == "go" && sub == "run":
		return packageName(positional(rest[1:], map[string]bool{"-tags": true, "-C": true}))
	}
	return programName(argv[0])
}

// launchedCommand names the command in rest, which follows a launcher's
// flags (`uv run --with x python server.py`).
func launchedCommand(rest []string, valueFlags map[string]bool, depth int) string {
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			return launchedName(rest[i+1:], depth+1)
		case valueFlags[a]:
			i++
		case !strings.HasPrefix(a, "-"):
			if strings.Contains(path.Base(slashed(a)), ".") {
				return scriptName(a) // uv run server.py
			}
			return launchedName(rest[i:], depth+1)
		}
	}
	return ""
}

// packageRun names what a package runner runs: the package it fetches
// (`npx -y @scope/pkg`), or the command named after --package/--from.
func packageRun(rest []string, valueFlags map[string]bool) string {
	pkg := ""
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			if i+1 < len(rest) {
				return packageName(rest[i+1])
			}
			return packageName(pkg)
		case a == "-p" || a == "--package" || a == "--from":
			if i+1 < len(rest) {
				pkg = rest[i+1]
			}
			i++
		case strings.HasPrefix(a, "--package=") || strings.HasPrefix(a, "--from="):
			_, pkg, _ = strings.Cut(a, "=")
		case valueFlags[a]:
			i++
		case !strings.HasPrefix(a, "-"):
			return packageName(a)
		}
	}
	return packageName(pkg)
}

// positional is the first argument of rest that is not a flag or a flag's
// value; flags not in valueFlags are taken to stand alone.
func positional(rest []string, valueFlags map[string]bool) string {
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			if i+1 < len(rest) {
				return rest[i+1]
			}
			return ""
		case valueFlags[a]:
			i++
		case !strings.HasPrefix(a, "-") || a == "-":
			return a
		}
	}
	return ""
}

func isPython(prog string) bool {
	if prog == "py" || prog == "pythonw" {
		return true
	}
	v, ok := strings.CutPrefix(prog, "python")
	return ok && strings.Trim(v, "0123456789.") == ""
}

var (
	npxValueFlags = map[string]bool{"-c": true, "--call": true, "--registry": true, "--cache": true, "--userconfig": true,
		"-w": true, "--workspace": true, "--loglevel": true}
	uvxValueFlags = map[string]bool{"--with": true, "--with-editable": true, "--with-requirements": true, "--python": true,
		"--index": true, "--index-url": true, "--extra-index-url": true, "--default-index": true, "--directory": true,
		"--project": true, "--cache-dir": true, "--config-file": true, "--python-preference": true, "--spec": true,
		"--pip-args": true, "--constraints": true, "--overrides": true, "--env-file": true}
	uvRunValueFlags = map[string]bool{"--with": true, "--with-editable": true, "--with-requirements": true, "--python": true,
		"-p": true, "--directory": true, "--project": true, "--package": true, "--extra": true, "--group": true,
		"--index": true, "--index-url": true, "--env-file": true, "--cache-dir": true, "--config-file": true}
	pythonValueFlags = map[string]bool{"-X": true, "-W": true, "--check-hash-based-pycs": true}
	nodeValueFlags   = map[string]bool{"-r": true, "--require": true, "--import": true, "--loader": true,
		"--experimental-loader": true, "--env-file": true, "--conditions": true, "-C": true, "--title": true,
		"--max-old-space-size": true, "--stack-size": true, "--tsconfig": true}
	denoValueFlags         = map[string]bool{"--config": true, "-c": true, "--import-map": true, "--lock": true, "--cert": true, "--env-file": true, "--location": true, "--seed": true, "--v8-flags": true}
	dockerGlobalValueFlags = map[string]bool{"--context": true, "-c": true, "-H": true, "--host": true, "--config": true, "-l": true, "--log-level": true}
	dockerRunValueFlags    = map[string]bool{
		"-e": true, "--env": true, "--env-file": true, "-v": true, "--volume": true, "-p": true, "--publish": true,
		"--name": true, "-w": true, "--workdir": true, "-u": true, "--user": true, "--network": true, "--net": true,
		"--mount": true, "--entrypoint": true, "-l": true, "--label": true, "--label-file": true, "--platform": true,
		"--pull": true, "--cpus": true, "-m": true, "--memory": true, "--add-host": true, "--cap-add": true,
		"--cap-drop": true, "--device": true, "--dns": true, "-h": true, "--hostname": true, "--ipc": true,
		"--link": true, "--log-driver": true, "--log-opt": true, "--pid": true, "--restart": true, "--runtime": true,
		"--security-opt": true, "--shm-size": true, "--stop-signal": true, "--stop-timeout": true, "--tmpfs": true,
		"--ulimit": true, "--userns": true, "--uts": true, "--volumes-from": true, "--gpus": true, "--cidfile": true,
		"--group-add": true, "--memory-swap": true, "--cpu-shares": true, "-c": true, "--cpuset-cpus": true,
		"--expose": true, "-a": true, "--attach": true, "--detach-keys": true, "--domainname": true, "--ip": true,
		"--ip6": true, "--mac-address": true, "--isolation": true, "--sysctl": true, "--storage-opt": true,
		"--health-cmd": true, "--health-interval": true, "--health-retries": true, "--health-timeout": true,
		"--volume-driver": true, "--oom-score-adj": true, "--network-alias": true, "--annotation": true,
	}
)

// slashed is p with Windows separators turned to '/', so that path.Base
// and path.Dir see a Windows path's parts on any OS.
func slashed(p string) string { return strings.ReplaceAll(p, `\`, "/") }

// programName is a program's file name without its directory or a Windows
// executable suffix.
func programName(p string) string {
	base := path.Base(strings.TrimRight(slashed(p), "/"))
	for _, ext := range []string{".exe", ".cmd", ".bat", ".ps1", ".com"} {
		if len(base) > len(ext) && strings.EqualFold(base[len(base)-len(ext):], ext) {
			return clean(base[:len(base)-len(ext)])
		}
	}
	return clean(base)
}

// packageName is the name of a package spec: npm's `@scope/name@1.2`, a
// Python requirement `name==1.0` or `name[extra]`, a JSR or npm: spec, a
// git URL.
func packageName(spec string) string {
	for _, p := range []string{"npm:", "jsr:", "pypi:", "git+"} {
		spec = strings.TrimPrefix(spec, p)
	}
	if i := strings.Index(spec, "://"); i >= 0 || strings.HasPrefix(spec, "github:") {
		spec = strings.TrimSuffix(strings.TrimRight(slashed(spec), "/"), ".git")
		if j := strings.IndexAny(spec, "#?"); j >= 0 {
			spec = spec[:j]
		}
		return clean(path.Base(strings.TrimSuffix(spec, ".git")))
	}
	if strings.HasPrefix(spec, "@") { // @scope/name[@version]
		if _, name, ok := strings.Cut(spec, "/"); ok {
			spec = name
		}
	}
	if i := strings.IndexAny(spec, "@=<>~![;, "); i > 0 {
		spec = spec[:i]
	}
	if strings.ContainsAny(spec, "/\\") { // a local path or a Go package
		return scriptName(spec)
	}
	return clean(spec)
}

// moduleName is a Python module's or Java class's name.
func moduleName(mod string) string { return clean(mod) }

// genericStems are script names that say nothing about the server
// (`node /srv/weather/build/index.js`); the directory above says more.
var genericStems = map[string]bool{"index": true, "main": true, "server": true, "app": true, "cli": true,
	"mcp": true, "start": true, "run": true, "__main__": true, "mod": true, "stdio": true}

// buildDirs are directories a script's package keeps it in, skipped when a
// generic script name sends the search up.
var buildDirs = map[string]bool{"build": true, "dist": true, "lib": true, "src": true, "out": true,
	"bin": true, "cmd": true, "target": true, "esm": true, "cjs": true, ".": true, "": true}

// scriptName is a script's name without extension, or the name of the
// directory it is in when the script's own name is generic.
func scriptName(p string) string {
	if strings.Contains(p, "://") || strings.HasPrefix(p, "jsr:") || strings.HasPrefix(p, "npm:") {
		return packageName(p)
	}
	p = strings.TrimRight(slashed(p), "/")
	stem := path.Base(p)
	if i := strings.LastIndexByte(stem, '.'); i > 0 {
		stem = stem[:i]
	}
	if !genericStems[strings.ToLower(stem)] {
		return clean(stem)
	}
	for dir := path.Dir(p); dir != "." && dir != "/" && dir != ""; dir = path.Dir(dir) {
		if d := path.Base(dir); !buildDirs[strings.ToLower(d)] && !strings.HasSuffix(d, ":") {
			return clean(d)
		}
	}
	return clean(stem)
}

// imageName is a container image's name: `ghcr.io/github/github-mcp-server:1`
// → github-mcp-server.
func imageName(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	base := path.Base(image)
	if i := strings.IndexByte(base, ':'); i > 0 {
		base = base[:i]
	}
	return clean(base)
}

// clean keeps a name usable in a file name and a log line: no separators,
// no control characters, no dots at its ends.
func clean(name string) string {
	name = strings.Map(func(r rune) rune {
		switch {
		case r == '/' || r == '\\':
			return '-'
		case r < ' ' || r == 0x7f:
			return -1
		}
		return r
	}, name)
	return strings.Trim(name, ". ")
}
