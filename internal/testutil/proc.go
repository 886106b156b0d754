package testutil

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Proc is a child process started by Start, talked to over real pipes. Every read of
// its stdout and every wait for its exit is bounded by Guard.
type Proc struct {
	tb  testing.TB
	Cmd *exec.Cmd
	// Stdin is the write end of the child's stdin; closing it is the child's EOF.
	Stdin *os.File
	// Stdout reads the child's stdout. It is a pipe of the test's own, not exec's
	// StdoutPipe, so what the child wrote can still be read after it exited.
	Stdout io.Reader
	// Stderr is what the child wrote to stderr, unless cmd.Stderr was set before Start.
	Stderr *SyncBuffer

	out   *os.File
	lines *bufio.Reader
	done  chan struct{}
	err   error // cmd.Wait's, once done is closed
}

// Start starts cmd with pipes for its stdin and stdout and, unless cmd.Stderr is set,
// a SyncBuffer for its stderr. When the test ends the child is killed and waited for,
// and its stderr is logged if the test failed.
func Start(tb testing.TB, cmd *exec.Cmd) *Proc {
	tb.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		tb.Fatalf("testutil: %v", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		tb.Fatalf("testutil: %v", err)
	}
	p := &Proc{tb: tb, Cmd: cmd, Stdin: inW, Stdout: boundedReader{outR}, out: outR, done: make(chan struct{})}
	p.lines = bufio.NewReaderSize(p.Stdout, 1<<20)
	cmd.Stdin, cmd.Stdout = inR, outW
	if cmd.Stderr == nil {
		p.Stderr = &SyncBuffer{}
		cmd.Stderr = p.Stderr
	}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		tb.Fatalf("testutil: starting %s: %v", cmd.Path, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() {
		inW.Close()
		_ = cmd.Process.Kill()
		t := time.NewTimer(Guard)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			tb.Errorf("testutil: %s not reaped %v after SIGKILL", cmd.Path, Guard)
		}
		outR.Close()
		if tb.Failed() && p.Stderr != nil {
			tb.Logf("%s stderr:\n%s", cmd.Path, p.Stderr.String())
		}
	})
	return p
}

// boundedReader gives each read of a pipe Guard to return.
type boundedReader struct{ f *os.File }

func (r boundedReader) Read(b []byte) (int, error) {
	if err := r.f.SetReadDeadline(time.Now().Add(Guard)); err != nil {
		return 0, err
	}
	return r.f.Read(b)
}

// Send writes each line with a newline to the child's stdin.
func (p *Proc) Send(lines ...string) {
	p.tb.Helper()
	for _, l := range lines {
		if err := p.Stdin.SetWriteDeadline(time.Now().Add(Guard)); err != nil {
			p.tb.Fatalf("writing to %s: %v", p.Cmd.Path, err)
		}
		if _, err := io.WriteString(p.Stdin, l+"\n"); err != nil {
			p.tb.Fatalf("writing to %s: %v", p.Cmd.Path, err)
		}
	}
}

// ReadLine returns the next line of the child's stdout, newline included. Do not mix
// it with reads of Stdout: it buffers.
func (p *Proc) ReadLine() string {
	p.tb.Helper()
	line, err := p.lines.ReadString('\n')
	if err != nil {
		p.tb.Fatalf("reading %s's stdout: %v (read %q)%s", p.Cmd.Path, err, line, p.stderrNote())
	}
	return line
}

// ReadRest reads the child's stdout to its end (every writer gone), after what
// ReadLine already took.
func (p *Proc) ReadRest() []byte {
	p.tb.Helper()
	rest, err := io.ReadAll(p.lines)
	if err != nil {
		p.tb.Fatalf("reading %s's stdout: %v%s", p.Cmd.Path, err, p.stderrNote())
	}
	return rest
}

func (p *Proc) stderrNote() string {
	if p.Stderr == nil {
		return ""
	}
	return "; stderr: " + p.Stderr.String()
}

// Done is closed once the child has exited and been waited for.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits (at most Guard) for the child to exit and returns what exec's Wait said.
func (p *Proc) Wait() error {
	p.tb.Helper()
	Recv(p.tb, p.done, p.Cmd.Path+" to exit")
	return p.err
}

// ExitCode waits for the child to exit and returns its exit code (-1 if a signal
// ended it); any other failure of the wait fails the test.
func (p *Proc) ExitCode() int {
	p.tb.Helper()
	err := p.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		p.tb.Fatalf("%s: %v", p.Cmd.Path, err)
		return -1
	}
}
