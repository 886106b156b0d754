package recorder

import (
	"path/filepath"

	"github.com/bir-dev/bir-proxy/internal/statedir"
	"github.com/bir-dev/bir-proxy/journal"
)

// DefaultStateDir is where bir-proxy keeps its spool and journal (statedir.Dir).
func DefaultStateDir() (string, error) { return statedir.Dir() }

// JournalPath is the default journal of one server (journal.Path); kept for the
// callers of before the journal had a package of its own.
func JournalPath(stateDir, server string) string { return journal.Path(stateDir, server) }

func spoolDir(stateDir string) string { return filepath.Join(stateDir, "spool") }

// SpoolDir is the directory of the spool files under a state directory, for
// `bir-proxy log` to show the reports waiting there.
func SpoolDir(stateDir string) string { return spoolDir(stateDir) }

// fileSafe turns a server name into a file name part (statedir.FileName).
func fileSafe(server string) string { return statedir.FileName(server) }
