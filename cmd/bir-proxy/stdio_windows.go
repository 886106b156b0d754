package main

import (
	"io"
	"log/slog"
	"os"
)

func hostStdio(*slog.Logger) (io.Reader, io.Writer, func()) {
	return os.Stdin, os.Stdout, func() {}
}
