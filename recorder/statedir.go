package recorder

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// DefaultStateDir is where bir-proxy keeps its spool and journal:
// $XDG_STATE_HOME/bir-proxy, by default ~/.local/state/bir-proxy (on Windows
// %LocalAppData%\bir-proxy).
func DefaultStateDir() (string, error) {
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

// JournalDir is the directory of the journals under a state directory.
func JournalDir(stateDir string) string { return filepath.Join(stateDir, "journal") }

// JournalPath is the default journal of one server: <stateDir>/journal/<server>.jsonl.
func JournalPath(stateDir, server string) string {
	return filepath.Join(JournalDir(stateDir), fileSafe(server)+".jsonl")
}

func spoolDir(stateDir string) string { return filepath.Join(stateDir, "spool") }

// SpoolDir is the directory of the spool files under a state directory, for
// `bir-proxy log` to show the reports waiting there.
func SpoolDir(stateDir string) string { return spoolDir(stateDir) }

// fileSafe turns a server name into a file name part. It escapes rather than replaces
// (so two names never share a file) and hashes names too long for a file system.
func fileSafe(server string) string {
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
