package oauth

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// Opener opens a URL for the user. It returns once the opener has started; the
// process is waited for on its own and never ended by the proxy: a browser started
// by $BROWSER may be the user's own, which the end of a sign-in must not close.
type Opener func(ctx context.Context, url string) error

// SystemOpener follows the BROWSER convention: $BROWSER is a list of commands
// (':'-separated; ';' on Windows), each given the URL (in place of %s, or as its last
// argument), tried in order until one starts and does not fail at once. Without it, the
// platform's opener: xdg-open, open, or rundll32's URL handler.
func SystemOpener(getenv func(string) string) Opener {
	return func(ctx context.Context, u string) error {
		var cmds [][]string
		if b := getenv("BROWSER"); b != "" {
			sep := ":"
			if runtime.GOOS == "windows" {
				sep = ";"
			}
			for _, c := range strings.Split(b, sep) {
				f := strings.Fields(c)
				if len(f) == 0 {
					continue
				}
				subst := false
				for i := range f {
					if strings.Contains(f[i], "%s") {
						f[i], subst = strings.ReplaceAll(f[i], "%s", u), true
					}
				}
				if !subst {
					f = append(f, u)
				}
				cmds = append(cmds, f)
			}
		} else {
			switch runtime.GOOS {
			case "darwin":
				cmds = [][]string{{"open", u}}
			case "windows":
				cmds = [][]string{{"rundll32", "url.dll,FileProtocolHandler", u}}
			default:
				cmds = [][]string{{"xdg-open", u}}
			}
		}
		var last error = errors.New("no browser to open")
		for _, c := range cmds {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			cmd := exec.Command(c[0], c[1:]...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil // never the proxy's stdout: that is the protocol
			cmd.Env = os.Environ()
			if err := cmd.Start(); err != nil {
				last = err
				continue
			}
			// Reaped on its own: a browser started in the foreground runs until the
			// user closes it.
			go cmd.Wait()
			return nil
		}
		return last
	}
}
