package coordinator_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// An outcome_unknown is its own class, never a hold: a hold says nothing
// was written, so a caller that reads it as one may act as though the
// request never applied. Only authority_unavailable and no_space are holds.
func TestOutcomeUnknownIsNotAHold(t *testing.T) {
	if got := coordinator.OutcomeUnknown.Class(); got != coordinator.ClassOutcomeUnknown {
		t.Fatalf("OutcomeUnknown.Class() = %v, want ClassOutcomeUnknown (%v)", got, coordinator.ClassOutcomeUnknown)
	}
	foreign := errors.New("some transport error of no leasegate package")
	if got := coordinator.DispositionOf(foreign).Class(); got != coordinator.ClassOutcomeUnknown {
		t.Fatalf("class of a foreign error = %v, want ClassOutcomeUnknown", got)
	}
	for _, d := range coordinator.Dispositions() {
		hold := d == coordinator.AuthorityUnavailable || d == coordinator.NoSpace
		if (d.Class() == coordinator.ClassUnavailable) != hold {
			t.Errorf("%s.Class() = %v: only authority_unavailable and no_space are holds", d, d.Class())
		}
	}
}

// TestReexportsAreTheStoreTablesOwn: every disposition, class and sentinel
// of internal/store's table is re-exported by coordinator under its own
// name, and every constant or variable coordinator re-exports from store is
// the store identifier of the same name. The names are read from the two
// packages' source, so a re-export added later, or a store disposition,
// class or sentinel added without one, is checked too; a re-export that
// points at another name (ErrX = store.ErrY) goes red. The sets read from
// store's source are held against its table at run time, so the parse
// cannot miss them and pass with nothing to check.
func TestReexportsAreTheStoreTablesOwn(t *testing.T) {
	t.Parallel()
	const storePath = "github.com/leasegate/leasegate/internal/store"
	table := tableNames(t, "../internal/store")

	// The sets read from the source are the table's.
	ds := coordinator.Dispositions()
	sentinels, classes := map[error]bool{}, map[coordinator.Class]bool{coordinator.ClassUnknown: true}
	for _, d := range ds {
		m, _ := store.MeaningOf(d)
		if m.Sentinel != nil {
			sentinels[m.Sentinel] = true
		}
		classes[m.Class] = true
	}
	if len(table["Disposition"]) != len(ds) || len(table["Err"]) != len(sentinels) || len(table["Class"]) != len(classes) {
		t.Fatalf("read from internal/store's source: %d dispositions, %d sentinels, %d classes; its table has %d, %d, %d (with ClassUnknown)",
			len(table["Disposition"]), len(table["Err"]), len(table["Class"]), len(ds), len(sentinels), len(classes))
	}

	re := reexports(t, ".", storePath)
	for name, of := range re {
		if of != name {
			t.Errorf("coordinator.%s = store.%s: a re-export must be the store identifier of its own name", name, of)
		}
	}
	for kind, names := range table {
		for _, name := range names {
			if _, ok := re[name]; !ok {
				t.Errorf("store's %s %s is not re-exported by coordinator as store.%s", kind, name, name)
			}
		}
	}
}

// tableNames reads the exported names of dir's package by what they are:
// constants of type Disposition or Class, and variables named Err*.
func tableNames(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, f := range parseDir(t, dir) {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			typ := "" // a constant spec without type or value repeats the one before it
			for _, spec := range gd.Specs {
				vs, ok := spec.(*ast.ValueSpec)
				if !ok {
					continue
				}
				switch {
				case vs.Type != nil:
					typ = ""
					if id, ok := vs.Type.(*ast.Ident); ok {
						typ = id.Name
					}
				case len(vs.Values) > 0:
					typ = ""
				}
				for _, n := range vs.Names {
					switch {
					case !n.IsExported():
					case gd.Tok == token.CONST && (typ == "Disposition" || typ == "Class"):
						out[typ] = append(out[typ], n.Name)
					case gd.Tok == token.VAR && strings.HasPrefix(n.Name, "Err"):
						out["Err"] = append(out["Err"], n.Name)
					}
				}
			}
		}
	}
	return out
}

// reexports maps each top-level constant or variable of dir's package whose
// value is an identifier of the package at importPath to that identifier's
// name.
func reexports(t *testing.T, dir, importPath string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range parseDir(t, dir) {
		local := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == importPath {
				local = path.Base(p)
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			continue
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || (gd.Tok != token.CONST && gd.Tok != token.VAR) {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					sel, ok := v.(*ast.SelectorExpr)
					if !ok {
						continue
					}
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == local && i < len(vs.Names) {
						out[vs.Names[i].Name] = sel.Sel.Name
					}
				}
			}
		}
	}
	return out
}

// parseDir parses the non-test Go files of dir.
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go file in %s", dir)
	}
	return files
}
