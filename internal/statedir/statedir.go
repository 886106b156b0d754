// Package statedir is where bir-proxy keeps what outlives a run, under one folder
// ($XDG_STATE_HOME/bir-proxy): the spool (recorder), the journal (journal), the tool
// pins (pins); how a server's name becomes a file's; and how the files of reports are
// kept the user's alone (PrivateDir, PrivateFile, perms.go).
package statedir

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Dir is bir-proxy's state folder: $XDG_STATE_HOME/bir-proxy, by default
// ~/.local/state/bir-proxy (on Windows %LocalAppData%\bir-proxy).
func Dir() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "bir-proxy"), nil
	}
	if runtime.GOOS == "windows" {
		dir, err := os.UserCacheDir() // %LocalAppData%
		if err != nil {
			return "", fmt.Errorf("find the state directory: %w", err)
		}
		return filepath.Join(dir, "bir-proxy"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the state directory: %w", err)
	}
	if home == "" {
		return "", errors.New("find the state directory: no home directory")
	}
	return filepath.Join(home, ".local", "state", "bir-proxy"), nil
}

// FileName turns a server name into a file name part. It escapes rather than replaces
// (so two names never share a file) and hashes names too long for a file system.
func FileName(server string) string {
	const hexdig = "0123456789ABCDEF"
	out := make([]byte, 0, len(server))
	for i := 0; i < len(server); i++ {
		c := server[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_',
			c == '.' && i > 0:
			out = append(out, c)
		default:
			out = append(out, '%', hexdig[c>>4], hexdig[c&15])
		}
	}
	if len(out) == 0 {
		return "%"
	}
	if len(out) > 100 {
		sum := sha256.Sum256([]byte(server))
		out = append(out[:80:80], '~')
		out = append(out, hex.EncodeToString(sum[:8])...)
	}
	return string(out)
}
