package main

import (
	"errors"

	"github.com/bir-dev/bir-proxy/verify"
)

func journalSource(p *proxyFlags, since string) (func() (verify.Source, error), error) {
	return nil, errors.New("--from-journal: not yet")
}
