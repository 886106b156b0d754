package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// newFlagSet returns a flag set that prints nothing while parsing: parseFlags turns an
// error into one line on stderr (a host's log shows one clear line, not a page of
// usage) and --help into the usage on stdout.
func newFlagSet(name, header string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprint(os.Stdout, header)
		fs.SetOutput(os.Stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parseFlags parses args; ok is false when the program should exit with code.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	usage := fs.Usage
	fs.Usage = func() {} // flag calls it on every error; we decide what to print below
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		usage()
		return 0, false
	default:
		fmt.Fprintf(os.Stderr, "%s: %s (see %s --help)\n", fs.Name(), strings.TrimSpace(err.Error()), fs.Name())
		return 2, false
	}
}
