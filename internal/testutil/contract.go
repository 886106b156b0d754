package testutil

import (
	"path/filepath"
	"testing"
)

// ContractFiles are the contract's test data the tests use: the fingerprint vectors
// (SPEC §3.2) and the redaction corpus (SPEC §3.3). They live in the repository under
// testdata/contract/, so a clone anywhere has them; they are copies of the contract's
// own, and a test fails if they drift from it where the contract is checked out.
var ContractFiles = []string{"fingerprint-vectors.json", "redaction-corpus.json"}

// ContractFile returns the path of one of ContractFiles in this repository.
func ContractFile(tb testing.TB, name string) string {
	tb.Helper()
	return filepath.Join(ModuleRoot(tb), "testdata", "contract", name)
}
