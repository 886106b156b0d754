//go:build !(linux && amd64)

package upstream

import (
	"errors"
	"os"
)

func startRawSupervisor(string, []string, []string, string, *os.File, *os.File, *os.File) (*os.Process, any, error) {
	return nil, nil, errors.New("no forked supervisor on this platform")
}

func canForkSupervisor() bool { return false }
