//go:build !linux

package upstream

import (
	"fmt"
	"os"
)

// Supervise exists only on Linux; a Command never starts a supervisor elsewhere.
func Supervise(_ []string, _, _, stderr *os.File) int {
	fmt.Fprintln(stderr, "bir-proxy: __supervise is internal, and only used on Linux")
	return 2
}
