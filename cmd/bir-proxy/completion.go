package main

import (
	"context"
	"flag"
	"strings"

	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/completioncmd"
)

// runCompletion is `bir-proxy completion`: its room is completioncmd, which writes
// the scripts from the commands and flags described here.
func runCompletion(_ context.Context, c *cli, args []string) int {
	self, _ := findSubcommand("completion")
	_, args, code, ok := c.parseCommand(self, args, false)
	if !ok {
		return code
	}
	return completioncmd.Run(completioncmd.Options{
		Stdout: c.stdout, Stderr: c.stderr, Args: args,
		Description:      completionDescription(),
		ProxyArgsProblem: proxyArgsProblem,
	})
}

// completionDescription describes the subcommands (in their order) and the proxy's
// flags for the completion scripts.
func completionDescription() completioncmd.Description {
	var d completioncmd.Description
	for _, sc := range subcommands() {
		d.Commands = append(d.Commands, completioncmd.Command{Name: sc.name, Summary: sc.summary, Flags: described(commandCompletionFlags(sc))})
	}
	d.Proxy = described(proxyCompletionFlags())
	return d
}

// completionFlag is one flag as a completion offers it.
type completionFlag struct {
	name, usage string
	takesValue  bool
}

func described(fs []completionFlag) []completioncmd.Flag {
	out := make([]completioncmd.Flag, 0, len(fs))
	for _, f := range fs {
		out = append(out, completioncmd.Flag{Name: f.name, Usage: f.usage, TakesValue: f.takesValue})
	}
	return out
}

func flagsOf(define func(fs *flag.FlagSet)) []completionFlag {
	fs := newFlagSet("bir-proxy")
	define(fs)
	var out []completionFlag
	fs.VisitAll(func(f *flag.Flag) {
		bf, isBool := f.Value.(interface{ IsBoolFlag() bool })
		usage, _ := strings.CutSuffix(f.Usage, "\n")
		if i := strings.IndexAny(usage, ";("); i > 0 {
			usage = usage[:i] // the first clause is enough beside a flag
		}
		out = append(out, completionFlag{name: f.Name, usage: strings.TrimSpace(usage), takesValue: !isBool || !bf.IsBoolFlag()})
	})
	return out
}

func proxyCompletionFlags() []completionFlag {
	return flagsOf(func(fs *flag.FlagSet) { defineProxyFlags(fs) })
}

func commandCompletionFlags(sc subcommand) []completionFlag {
	return flagsOf(func(fs *flag.FlagSet) { sc.flags(fs) })
}
