package testutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestContractCopies: the repository's copies of the contract's test data are there
// and are JSON, and, where the contract is checked out beside this repository (as
// ../shared), they are its files byte for byte. Only that comparison is skipped when
// ../shared is absent, as in a clone of this repository alone.
func TestContractCopies(t *testing.T) {
	shared := filepath.Join(ModuleRoot(t), "..", "shared", "testdata")
	_, err := os.Stat(shared)
	haveShared := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("looking for the contract's test data: %v", err)
	}
	for _, name := range ContractFiles {
		t.Run(name, func(t *testing.T) {
			ours, err := os.ReadFile(ContractFile(t, name))
			if err != nil {
				t.Fatalf("the repository's copy: %v", err)
			}
			if !json.Valid(ours) || len(bytes.TrimSpace(ours)) < 3 {
				t.Fatalf("the repository's copy of %s is not a JSON document", name)
			}
			if !haveShared {
				t.Skipf("no %s beside this repository to compare with", shared)
			}
			theirs, err := os.ReadFile(filepath.Join(shared, name))
			if err != nil {
				t.Fatalf("the contract's %s: %v", name, err)
			}
			if !bytes.Equal(ours, theirs) {
				t.Fatalf("testdata/contract/%s differs from %s: copy the contract's file again "+
					"(cp %s testdata/contract/) and make the tests pass with it",
					name, filepath.Join(shared, name), filepath.Join(shared, name))
			}
		})
	}
}
