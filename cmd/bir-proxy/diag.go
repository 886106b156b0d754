package main

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// diagQueue bounds what the proxy's own diagnostics may hold while stderr is not
// being read. A host that never drains the proxy's stderr fills the pipe (64 KiB);
// after that every write would block, and a log line on a pump would stop the relay,
// or, at exit, stop the proxy from exiting at all. Past the bound, lines are dropped
// and counted.
const diagQueue = 256

// diagWriter writes the proxy's diagnostics (its log, the server's non-message stdout
// lines) to w from a goroutine of its own, dropping what does not fit, so that no
// caller ever waits on stderr. Each Write is one whole line or record, queued whole.
type diagWriter struct {
	w       io.Writer
	ch      chan []byte
	dropped atomic.Int64
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	// file is --log-file's own queue and goroutine: a file that is slow or failing
	// holds no stderr line back, and a stderr nobody reads no file line.
	file    *diagWriter
	logFile *logFile
	toFile  bool // d is a file's: its note of dropped lines says so
}

func newDiagWriter(w io.Writer) *diagWriter {
	d := &diagWriter{w: w, ch: make(chan []byte, diagQueue), stop: make(chan struct{}), done: make(chan struct{})}
	go d.run()
	return d
}

// addLogFile makes d also write every line to path (--log-file), from now on. A file
// that cannot be opened is said on stderr, and the proxy logs to stderr alone. Called
// once, before d is shared.
func (d *diagWriter) addLogFile(path string) {
	l, err := openLogFile(path)
	if err != nil {
		d.queue([]byte(fmt.Sprintf("bir-proxy: the log file %s cannot be written, logging to stderr only: %v\n", path, err)))
		return
	}
	d.logFile = l
	d.file = newDiagWriter(&logFileSink{l: l, said: func(s string) { d.queue([]byte(s)) }})
	d.file.toFile = true
}

// Write queues p and never waits; it always reports success, as a log line that
// could not be written is not the caller's failure.
func (d *diagWriter) Write(p []byte) (int, error) {
	if d.file != nil {
		d.file.Write(p)
	}
	return d.queue(p)
}

// queue is Write to stderr alone.
func (d *diagWriter) queue(p []byte) (int, error) {
	select {
	case d.ch <- bytes.Clone(p):
	default:
		d.dropped.Add(1)
	}
	return len(p), nil
}

func (d *diagWriter) run() {
	defer close(d.done)
	for {
		select {
		case b := <-d.ch:
			d.write(b)
		case <-d.stop:
			for {
				select {
				case b := <-d.ch:
					d.write(b)
				default:
					return
				}
			}
		}
	}
}

func (d *diagWriter) write(b []byte) {
	if n := d.dropped.Swap(0); n > 0 {
		if d.toFile {
			fmt.Fprintf(d.w, "bir-proxy: %d diagnostic lines were dropped: the log file was not keeping up\n", n)
		} else {
			fmt.Fprintf(d.w, "bir-proxy: %d diagnostic lines were dropped: nothing was reading stderr\n", n)
		}
	}
	_, _ = d.w.Write(b)
}

// Close writes what is queued, waiting at most grace: at exit, a stderr nobody reads
// must not keep the proxy alive.
func (d *diagWriter) Close(grace time.Duration) {
	d.once.Do(func() { close(d.stop) })
	t := time.NewTimer(grace)
	defer t.Stop()
	if d.file != nil {
		d.file.once.Do(func() { close(d.file.stop) })
		select {
		case <-d.file.done:
			d.logFile.Close()
		case <-t.C:
			return
		}
	}
	select {
	case <-d.done:
	case <-t.C:
	}
}
