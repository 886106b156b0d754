package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// logFileMax is the size at which --log-file is rotated: FILE becomes FILE.1 (the
// previous FILE.1 is dropped), so the log takes at most twice this on disk however
// long the hosts run (docs/config.md).
const logFileMax = 10 << 20

// logFile is --log-file: the proxy's stderr lines appended to FILE (0600, in a folder
// made 0700 if missing), never through a symbolic link at FILE. Several proxies may
// write one file (the configuration file gives all of them the same): appends are
// whole lines, and before each write the file is checked to still be FILE, so a proxy
// whose file another rotated opens the new one instead of rotating it again.
// Written only from the diag writer's goroutine, never on the host path.
type logFile struct {
	path string
	max  int64
	f    *os.File
}

func openLogFile(path string) (*logFile, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	l := &logFile{path: path, max: logFileMax}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *logFile) open() error {
	// A FIFO or a device at FILE would block the open, or the writes, forever.
	if fi, err := os.Lstat(l.path); err == nil && !fi.Mode().IsRegular() {
		if fi.Mode()&fs.ModeSymlink != 0 {
			return errors.New("it is a symbolic link: refused (the proxy would write where it points)")
		}
		return errors.New("not a regular file")
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|logNoFollow, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return errors.New("it is a symbolic link: refused (the proxy would write where it points)")
	}
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return errors.New("not a regular file")
	}
	l.f = f
	return nil
}

func (l *logFile) Write(p []byte) (int, error) {
	if l.f == nil {
		if err := l.open(); err != nil {
			return 0, err
		}
	}
	fi, err := l.f.Stat()
	if err != nil {
		return 0, err
	}
	cur, err := os.Lstat(l.path)
	switch {
	case err != nil || !os.SameFile(fi, cur):
		// Another proxy rotated it (or it was removed): write to FILE as it is now.
		l.f.Close()
		l.f = nil
		if err := l.open(); err != nil {
			return 0, err
		}
	case fi.Size() > 0 && fi.Size()+int64(len(p)) > l.max:
		l.f.Close()
		l.f = nil
		if err := os.Rename(l.path, l.path+".1"); err != nil {
			return 0, fmt.Errorf("rotate: %w", err)
		}
		if err := l.open(); err != nil {
			return 0, err
		}
	}
	return l.f.Write(p)
}

func (l *logFile) Close() {
	if l.f != nil {
		l.f.Close()
	}
}

// logFileSink writes to a logFile, saying its first failure (once) through said.
type logFileSink struct {
	l    *logFile
	said func(string)
	once sync.Once
}

func (s *logFileSink) Write(p []byte) (int, error) {
	n, err := s.l.Write(p)
	if err != nil {
		s.once.Do(func() {
			s.said(fmt.Sprintf("bir-proxy: the log file %s: %v; its lines are on stderr only until it can be written\n", s.l.path, err))
		})
	}
	return n, err
}
