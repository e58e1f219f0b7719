package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckRefusesARottenList: a snippet missing from its file, or found
// twice, or a -run pattern naming no test of its package, fails the check
// and is named; a list that matches passes.
func TestCheckRefusesARottenList(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := "a := 1\nb := 2\nb := 2\n"
	if err := os.WriteFile(filepath.Join(root, "p/f.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "p/f_test.go"), []byte("func TestKills(t *testing.T) {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := mut("ok", "p/f.go", "", "a := 1", "a := 0", run("./p", "TestKills$/sub"), Run{Pkg: "./p"})
	if err := check(root, []Mutation{ok}); err != nil {
		t.Fatalf("a matching list: %v", err)
	}
	if got := apply(src, ok.Edits); got != "a := 0\nb := 2\nb := 2\n" {
		t.Fatalf("apply: %q", got)
	}
	for _, bad := range []Mutation{
		mut("gone", "p/f.go", "", "c := 3", "", Run{Pkg: "./p"}),
		mut("twice", "p/f.go", "", "b := 2", "", Run{Pkg: "./p"}),
		mut("no-file", "p/g.go", "", "a := 1", "", Run{Pkg: "./p"}),
		{Name: "no-tests", File: "p/f.go", Edits: []Edit{{"a := 1", ""}}},
		mut("no-such-test", "p/f.go", "", "a := 1", "", run("./p", "^TestRenamed$")),
		mut("bad-pattern", "p/f.go", "", "a := 1", "", run("./p", "TestKills(")),
	} {
		err := check(root, []Mutation{ok, bad})
		if err == nil || !strings.Contains(err.Error(), bad.Name+":") {
			t.Fatalf("%s: check = %v; want it named", bad.Name, err)
		}
	}
	if err := check(root, []Mutation{ok, ok}); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("duplicate names: %v", err)
	}
}

// TestTopLevelNamesFailingTests reads go test's output.
func TestTopLevelNamesFailingTests(t *testing.T) {
	out := "--- FAIL: TestA (0.1s)\n    --- FAIL: TestA/sub (0.0s)\n--- FAIL: TestB (0.2s)\n--- FAIL: TestA (0.1s)\nFAIL\n"
	if got := strings.Join(topLevel(out), ","); got != "TestA,TestB" {
		t.Fatalf("topLevel = %q", got)
	}
	if got := topLevel("panic: boom\nFAIL\n"); len(got) != 0 {
		t.Fatalf("topLevel of a panic = %q", got)
	}
}
