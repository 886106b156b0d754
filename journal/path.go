package journal

import (
	"path/filepath"

	"github.com/bir-dev/bir-proxy/internal/statedir"
)

// Dir is the directory of the journals under a state directory (statedir.Dir).
func Dir(stateDir string) string { return filepath.Join(stateDir, "journal") }

// Path is the default journal of one server: <stateDir>/journal/<server>.jsonl.
func Path(stateDir, server string) string {
	return filepath.Join(Dir(stateDir), statedir.FileName(server)+".jsonl")
}
