package telemetry

import (
	"path/filepath"

	"github.com/bir-dev/bir-proxy/internal/statedir"
)

// StateDir is where the proxies' exporters leave their counts for `bir-proxy
// status`: stateDir's otel/ (next to the journal and the spool).
func StateDir(stateDir string) string { return filepath.Join(stateDir, "otel") }

// StatePath is the state file of server's exporter under stateDir. Its name is the
// server's as the journal's is (statedir.FileName: escaped, so two names never share
// a file).
func StatePath(stateDir, server string) string {
	return filepath.Join(StateDir(stateDir), statedir.FileName(server)+StateSuffix)
}
