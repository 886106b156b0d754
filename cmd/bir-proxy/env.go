package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// parseSwitch reads an on/off environment variable the way people write them. An
// unrecognised value is an error, never a silent default: BIR_OFF=yes once left
// recording on because strconv.ParseBool does not know "yes".
func parseSwitch(name, v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "false", "f", "no", "n", "off":
		return false, nil
	case "1", "true", "t", "yes", "y", "on":
		return true, nil
	}
	return false, fmt.Errorf("%s=%q is not understood: use 1, true, yes or on (or 0, false, no, off)", name, v)
}

// off reports BIR_OFF: a pure pipe, with no request to a recorder, no spool, no
// journal. runProxy has already refused a value parseSwitch does not know.
func off() bool {
	v, _ := parseSwitch("BIR_OFF", os.Getenv("BIR_OFF"))
	return v
}

// streamThreshold reads BIR_STREAM_THRESHOLD, the size in bytes from which a server's
// message is passed to the host as it arrives (relay.Options.StreamThreshold): unset
// is the default, 0 is never (every message whole, as before 2026-12), 1 every
// message that can be. The tests run the transparency suites with 1.
func streamThreshold() (int, error) {
	v := strings.TrimSpace(os.Getenv("BIR_STREAM_THRESHOLD"))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("BIR_STREAM_THRESHOLD=%q is not understood: use a size in bytes (0: never stream)", v)
	}
	if n == 0 {
		return -1, nil
	}
	return n, nil
}
