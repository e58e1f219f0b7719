package store_test

import (
	"errors"
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInternalImportsNothingAbove: internal/ is the floor the library
// stands on. Its packages import none of the module's packages outside
// internal/ (coordinator, the ledger, the API, the gateway, test support):
// the import graph reads one way, library at the bottom.
func TestInternalImportsNothingAbove(t *testing.T) {
	t.Parallel()
	const module = "github.com/leasegate/leasegate/"
	dirs, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		pkg, err := build.ImportDir(filepath.Join("..", d.Name()), 0)
		var none *build.NoGoError
		if errors.As(err, &none) {
			continue // a directory left empty: no package
		}
		if err != nil {
			t.Fatalf("internal/%s: %v", d.Name(), err)
		}
		checked++
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, module) && !strings.HasPrefix(imp, module+"internal/") {
				t.Errorf("internal/%s imports %s, above the floor", d.Name(), imp)
			}
		}
	}
	if checked < 3 {
		t.Fatalf("checked %d packages under internal/; want store, digest, secretfile at least", checked)
	}
}
