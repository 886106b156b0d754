package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/telemetry/mcpspans"
	"github.com/bir-dev/bir-proxy/toolpolicy"

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

// definePinFlags defines --pin-tools and --read-only on fs (the proxy's, and wrap's).
func definePinFlags(fs *flag.FlagSet, mode *string, readOnly *bool) {
	fs.StringVar(mode, "pin-tools", "", "pin each tool on first sight and say when a server changes one: `MODE` warn, block (hide and refuse a changed tool until bir-proxy pins approve) or off (env BIR_PIN_TOOLS; default warn)")
	fs.BoolVar(readOnly, "read-only", false, "show the host only the tools annotated readOnlyHint: true, now and in their pin, and refuse the others' calls (docs/pins.md)")
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
// --pin-tools off (unless --read-only), and under BIR_OFF (a pure pipe writes
// nothing: pins are off, --read-only still holds).
func (f *proxyFlags) pinWatcher(off bool, logger *slog.Logger) *pins.Watcher {
	mode := f.pinTools
	if off {
		mode = pins.ModeOff
	}
	if mode == pins.ModeOff && !f.readOnly {
		return nil
	}
	state, err := statedir.Dir()
	if err != nil && mode != pins.ModeOff {
		logger.Warn("tool pins are off", "err", err)
		if !f.readOnly {
			return nil
		}
		mode = pins.ModeOff
	}
	return pins.NewWatcher(pins.Open(state), f.server, mode, f.readOnly, logger)
}

// plugPins plugs the watcher in: where it hides tools (block mode, --read-only), into
// the tool policy, which shows it each tools/list answer on the server's pump before
// the cut; in warn mode into bookkeeping, off the host's path. With spans (whose
// Tracing.ToolDrift is then set), each answer's drift goes to its tools/list span.
func plugPins(w *pins.Watcher, p *toolpolicy.Policy, ic *intercept.Options, spans *mcpspans.Spans, server string) {
	if w == nil {
		return
	}
	listed := func(result []byte, first bool) { w.Listed(result, first) }
	if spans != nil && w.Mode() != pins.ModeOff {
		listed = func(result []byte, first bool) {
			var drifts []mcpspans.Drift
			for _, s := range w.Listed(result, first) {
				if s.Status != pins.StatusPinned {
					drifts = append(drifts, mcpspans.Drift{Tool: s.Name, Status: s.Status, Changed: s.Changed, From: s.From})
				}
			}
			spans.ToolsListed(server, drifts)
		}
	}
	if w.Enforces() {
		p.Listed, p.Hide, p.HideWhy = listed, w.Hidden, w.HiddenWhy
		return
	}
	ic.ToolsListed = listed
}

// closePins waits for the watcher's last write, boundedly.
func closePins(w *pins.Watcher) {
	if w != nil {
		w.Close(2 * time.Second)
	}
}
