//go:build !linux

package main

import (
	"fmt"
	"os"
)

// runSupervise exists only on Linux; upstream never starts a supervisor elsewhere.
func runSupervise([]string) int {
	fmt.Fprintln(os.Stderr, "bir-proxy: __supervise is internal, and only used on Linux")
	return 2
}
