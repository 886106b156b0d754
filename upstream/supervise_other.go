//go:build !linux

package upstream

import (
	"fmt"
	"os"
)

// Supervise exists only on Linux; a Command never starts a supervisor elsewhere.
func Supervise([]string) int {
	fmt.Fprintln(os.Stderr, "bir-proxy: __supervise is internal, and only used on Linux")
	return 2
}
