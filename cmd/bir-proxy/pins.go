package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/pinscmd"
	"github.com/bir-dev/bir-proxy/internal/statedir"
	"github.com/bir-dev/bir-proxy/pins"
)

// runPins is `bir-proxy pins`: its room is pinscmd.
func runPins(_ context.Context, c *cli, args []string) int {
	sc, _ := findSubcommand("pins")
	opts, names, code, ok := c.parseCommand(sc, args, true)
	if !ok {
		return code
	}
	state, err := statedir.Dir()
	if err != nil {
		c.stderr.Write([]byte("bir-proxy pins: " + err.Error() + "\n"))
		return 1
	}
	return pinscmd.Run(pinscmd.Options{Stdout: c.stdout, Stderr: c.stderr, Store: pins.Open(state), JSON: *opts.(*bool), Args: names})
}

// definePinFlag defines --pin-tools on fs (the proxy's, and wrap's).
func definePinFlag(fs *flag.FlagSet, mode *string) {
	fs.StringVar(mode, "pin-tools", "", "pin each tool on first sight and say when a server changes one: `MODE` warn, block (hide and refuse a changed tool until bir-proxy pins approve) or off (env BIR_PIN_TOOLS; default warn)")
}

// checkPinMode settles --pin-tools: the flag, else BIR_PIN_TOOLS, else warn.
func checkPinMode(mode *string) error {
	from := "--pin-tools"
	if *mode == "" {
		*mode, from = os.Getenv("BIR_PIN_TOOLS"), "BIR_PIN_TOOLS"
	}
	m, err := pins.ParseMode(*mode)
	if err != nil {
		return fmt.Errorf("%s %q: %v", from, *mode, err)
	}
	*mode = m
	return nil
}

// pinWatcher is the proxy's watcher of its server's tool lists, or nil: with
// --pin-tools off, and under BIR_OFF (a pure pipe writes nothing).
func (f *proxyFlags) pinWatcher(off bool, logger *slog.Logger) *pins.Watcher {
	if off || f.pinTools == pins.ModeOff {
		return nil
	}
	state, err := statedir.Dir()
	if err != nil {
		logger.Warn("tool pins are off", "err", err)
		return nil
	}
	return pins.NewWatcher(pins.Open(state), f.server, f.pinTools, logger)
}

// closePins waits for the watcher's last write, boundedly.
func closePins(w *pins.Watcher) {
	if w != nil {
		w.Close(2 * time.Second)
	}
}
