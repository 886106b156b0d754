package mcpconfig

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// gitDeadline bounds the git command that asks whether a file is shared: a wrap
// must not hang on a repository on a dead network mount.
const gitDeadline = 5 * time.Second

// GitShared reports whether git shares file, and how: it is tracked, or it is in a
// work tree and not ignored (the next `git add .` commits it). Without git, or
// outside a repository, it is not. A file git shares must get a bir-proxy command
// that runs on every machine (this machine's absolute path would be "Failed to
// connect" for a teammate).
func GitShared(ctx context.Context, file string) (bool, string) {
	if real, err := filepath.EvalSymlinks(file); err == nil {
		file = real
	}
	ctx, cancel := context.WithTimeout(ctx, gitDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "-C", filepath.Dir(file), "status", "--porcelain", "--ignored", "--", filepath.Base(file))
	out, err := cmd.Output()
	if err != nil {
		return false, "" // not a repository, or no git
	}
	switch s := string(out); {
	case strings.HasPrefix(s, "!!"):
		return false, ""
	case strings.HasPrefix(s, "??"):
		return true, "in a git work tree and not ignored"
	default:
		return true, "tracked by git"
	}
}
