package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/internal/userconfig"
	"github.com/bir-dev/bir-proxy/pins"
	"github.com/bir-dev/bir-proxy/redact"
)

// userConfigChecks check a value from the configuration file that the flag's Set
// would take but the proxy would later refuse: from the file it is a warning, never
// a proxy that does not start (a host is waiting on it).
var userConfigChecks = map[string]func(string) error{
	"pin-tools": func(v string) error { _, err := pins.ParseMode(v); return err },
	"log-level": func(v string) error { _, err := parseLogLevel(v); return err },
}

// applyUserConfig sets, from the configuration file (docs/config.md), the flags
// that the command line did not give and no environment variable settles: flag >
// environment > file > built-in default. Its warnings go to w, each once.
func applyUserConfig(fs *flag.FlagSet, f *proxyFlags, w io.Writer) {
	cfg := userconfig.Load(nearestWord)
	for _, m := range cfg.Warnings {
		fmt.Fprintf(w, "bir-proxy: %s\n", m)
	}
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, v := range cfg.Values {
		k := v.Key
		if given[k.Flag] || envGiven(k.Env) {
			continue
		}
		if k.Name == "cassette-dir" {
			f.cassetteDir = v.Value // a file per server: applied once its name is known
			continue
		}
		if fs.Lookup(k.Flag) == nil {
			fmt.Fprintf(w, "bir-proxy: %s: %q is ignored: this bir-proxy has no --%s\n", termtext.Line(cfg.Path), k.Name, k.Flag)
			continue
		}
		err := error(nil)
		if check := userConfigChecks[k.Flag]; check != nil {
			err = check(v.Value)
		}
		if err == nil {
			err = fs.Set(k.Flag, v.Value)
		}
		if err != nil {
			fmt.Fprintf(w, "bir-proxy: %s: %q %q is ignored: %v\n", termtext.Line(cfg.Path), k.Name, termtext.Line(v.Value), err)
		}
	}
}

// envGiven says one of names is set to something.
func envGiven(names []string) bool {
	for _, n := range names {
		if strings.TrimSpace(os.Getenv(n)) != "" {
			return true
		}
	}
	return false
}

// userConfigStatus is what `bir-proxy status` says of the configuration file: its
// path and the defaults it sets.
func userConfigStatus() string {
	var b strings.Builder
	cfg := userconfig.Load(nearestWord)
	switch {
	case cfg.Path == "":
	case !cfg.Found:
		fmt.Fprintf(&b, "defaults file: %s (none; docs/config.md)\n", termtext.Line(cfg.Path))
	case len(cfg.Values) == 0:
		fmt.Fprintf(&b, "defaults file: %s (sets nothing)\n", termtext.Line(cfg.Path))
	default:
		fmt.Fprintf(&b, "defaults file: %s (flags and environment variables win over it)\n", termtext.Line(cfg.Path))
	}
	for _, v := range cfg.Values {
		val := v.Value
		if v.Key.Name == "otlp-endpoint" {
			val = redact.URL(val)
		}
		fmt.Fprintf(&b, "  %s: %s\n", v.Key.Name, termtext.Line(val))
	}
	for _, m := range cfg.Warnings {
		fmt.Fprintf(&b, "  warning: %s\n", termtext.Line(m))
	}
	return b.String()
}

// cassetteFromDir gives the proxy the configuration file's cassette folder's file for
// its server, unless --cassette named one.
func (f *proxyFlags) cassetteFromDir() {
	if f.cassetteDir != "" && f.cassette.path == "" {
		f.cassette.path = filepath.Join(f.cassetteDir, cassette.FileName(f.server))
	}
}
