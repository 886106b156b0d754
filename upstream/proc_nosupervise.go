//go:build !linux

package upstream

import (
	"os"
	"os/exec"
)

// Supervised says a Command's Supervisor is used here. Without child subreapers and
// parent-death signals a supervisor could not do its job, so none is started.
const Supervised = false

// sigKillAll is never sent where nothing is supervised.
var sigKillAll os.Signal = os.Kill

func setSupervisorAttr(*exec.Cmd) {}

// supervisorEnv is never used where nothing is supervised.
func supervisorEnv(env []string) []string { return env }
