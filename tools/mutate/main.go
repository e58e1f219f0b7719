// Command mutate measures how well the test suite pins the safety-critical
// code: it applies each hand-written mutation of mutations.go (one compare
// of a Txn removed, a classification branch dropped or reordered, a
// comparison flipped, a guard skipped) to a copy of the tree, runs the
// tests, and reports each mutation killed (a test went red), survived (every
// test passed) or broken (the mutant did not compile: fix the mutation). It
// exits 1 if a mutation not marked equivalent survived, 3 if one was broken.
//
//	go run ./tools/mutate                 # every mutation; `make mutate`
//	go run ./tools/mutate -only 'claim'   # mutations whose name matches
//	go run ./tools/mutate -list           # the list, nothing run
//	go run ./tools/mutate -only '^indep/' # the independent list alone
//
// The list has two parts: mutations.go, written with the tests, and
// indep.go, written by someone who had read only the non-test code;
// docs/reliability.md gives the score of each.
//
// The real tree is never written: the tool copies the files git knows
// (tracked and untracked-but-not-ignored) into a temporary directory and
// mutates the copy, one mutation at a time, restoring each file after its
// run. Before running anything it checks that every mutation's original
// snippet occurs exactly once in its file, and that every -run pattern
// names a test of its package, and fails (exit 2) naming the ones that do
// not, so the list cannot silently rot as the code and its tests change.
//
// Each mutation first runs its targeted tests (package and -run pattern,
// the ones expected to kill it), stopping at the first red; a mutant that
// survives them is then run against the whole of each package named, so
// "survived" always means the full packages passed. A red test counts only
// if it is red again when run alone on the mutant; one that then passes is
// a flake of the shared machine, and is skipped for the rest of that
// mutation (the report names it). It is never part of
// `make test`: it runs the tests once per mutation (about 20 minutes on two
// loaded cores for mutations.go, and well over an hour more for indep.go,
// whose mutations each run whole packages; split it with -only).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Mutation is one hand-written change of one file.
type Mutation struct {
	Name  string
	File  string // relative to the module root
	What  string // one line: what it breaks
	Edits []Edit
	// Tests are run in order, each `go test -run Run Pkg`, until one goes
	// red. A mutant that survives them all is run against every Pkg whole.
	Tests []Run
	// Equivalent, when set, is why no test can kill this mutation (the
	// behaviour it removes is guaranteed by something else): a survivor
	// with a reason is counted as equivalent, not as a gap.
	Equivalent string
}

// Edit replaces Orig, which must occur exactly once in the file, by Repl.
type Edit struct{ Orig, Repl string }

// Run is one targeted test run.
type Run struct{ Pkg, Run string }

// Outcome of one mutation.
type Outcome string

const (
	Killed   Outcome = "killed"
	Survived Outcome = "survived"
	Broken   Outcome = "broken"
)

type result struct {
	m       Mutation
	outcome Outcome
	by      string // the test (or build error) that decided it
	took    time.Duration
}

func main() {
	only := flag.String("only", "", "run only the mutations whose name matches this regexp")
	list := flag.Bool("list", false, "list the mutations and exit")
	quick := flag.Bool("quick", false, "do not run survivors of the targeted tests against their whole packages")
	timeout := flag.Duration("timeout", 6*time.Minute, "go test -timeout for each run")
	keep := flag.Bool("keep", false, "keep the temporary copy of the tree")
	flag.Parse()

	ms := mutations
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fatal(2, "-only: %v", err)
		}
		var sel []Mutation
		for _, m := range ms {
			if re.MatchString(m.Name) {
				sel = append(sel, m)
			}
		}
		ms = sel
	}
	root, err := gitRoot()
	if err != nil {
		fatal(2, "%v", err)
	}
	if err := check(root, mutations); err != nil { // always the whole list: rot is reported even under -only
		fatal(2, "%v", err)
	}
	if *list {
		for _, m := range ms {
			eq := ""
			if m.Equivalent != "" {
				eq = "  [judged equivalent]"
			}
			fmt.Printf("%-40s %-28s %s%s\n", m.Name, m.File, m.What, eq)
		}
		return
	}
	if len(ms) == 0 {
		fatal(2, "no mutation matches -only %q", *only)
	}
	tmp, err := os.MkdirTemp("", "leasegate-mutate-")
	if err != nil {
		fatal(2, "%v", err)
	}
	if err := copyTree(root, tmp); err != nil {
		fatal(2, "copy the tree: %v", err)
	}
	fmt.Printf("mutate: %d mutations on a copy of %s in %s\n", len(ms), root, tmp)
	var results []result
	for i, m := range ms {
		r := runOne(tmp, m, *timeout, *quick)
		results = append(results, r)
		fmt.Printf("[%d/%d] %-8s %-40s %6.0fs  %s\n", i+1, len(ms), r.outcome, m.Name, r.took.Seconds(), r.by)
	}
	report(os.Stdout, results)
	code := 0
	for _, r := range results {
		switch {
		case r.outcome == Broken:
			code = 3
		case r.outcome == Survived && r.m.Equivalent == "" && code == 0:
			code = 1 // a gap: a test is missing, or the mutation is equivalent and says not why
		}
	}
	if !*keep { // here, not deferred: os.Exit runs no deferred call
		os.RemoveAll(tmp)
	}
	os.Exit(code)
}

// check verifies every edit's original snippet occurs exactly once.
func check(root string, ms []Mutation) error {
	var bad []string
	names := map[string]bool{}
	for _, m := range ms {
		if names[m.Name] {
			bad = append(bad, fmt.Sprintf("%s: duplicate mutation name", m.Name))
		}
		names[m.Name] = true
		src, err := os.ReadFile(filepath.Join(root, m.File))
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", m.Name, err))
			continue
		}
		if len(m.Edits) == 0 || len(m.Tests) == 0 {
			bad = append(bad, fmt.Sprintf("%s: no edits or no tests", m.Name))
		}
		for i, e := range m.Edits {
			if n := strings.Count(string(src), e.Orig); n != 1 {
				bad = append(bad, fmt.Sprintf("%s: edit %d: original snippet found %d times in %s (want exactly 1): %q",
					m.Name, i, n, m.File, e.Orig))
			}
		}
		for _, r := range m.Tests {
			if r.Run == "" {
				continue
			}
			if err := namesATest(root, r); err != nil {
				bad = append(bad, fmt.Sprintf("%s: %v", m.Name, err))
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("the mutation list no longer matches the code; update tools/mutate/mutations.go:\n  %s",
			strings.Join(bad, "\n  "))
	}
	return nil
}

var testFuncRE = regexp.MustCompile(`(?m)^func (Test\w*)\(`)

// namesATest checks that r's -run pattern matches a top-level test of its
// package, so that a test renamed or removed cannot leave a mutation
// pointing at nothing (go test would run no test and pass). Like go test,
// it matches the pattern's first slash-separated element against the
// top-level names.
func namesATest(root string, r Run) error {
	top, _, _ := strings.Cut(r.Run, "/")
	re, err := regexp.Compile(top)
	if err != nil {
		return fmt.Errorf("-run %q: %v", r.Run, err)
	}
	files, err := filepath.Glob(filepath.Join(root, r.Pkg, "*_test.go"))
	if err != nil {
		return err
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, mm := range testFuncRE.FindAllStringSubmatch(string(src), -1) {
			if re.MatchString(mm[1]) {
				return nil
			}
		}
	}
	return fmt.Errorf("-run %q matches no test in %s", r.Run, r.Pkg)
}

func apply(src string, edits []Edit) string {
	for _, e := range edits {
		src = strings.Replace(src, e.Orig, e.Repl, 1)
	}
	return src
}

var failRE = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// runOne mutates the copy, runs the tests, and restores the file.
func runOne(tmp string, m Mutation, timeout time.Duration, quick bool) result {
	start := time.Now()
	path := filepath.Join(tmp, m.File)
	orig, err := os.ReadFile(path)
	if err != nil {
		fatal(2, "%v", err)
	}
	defer func() {
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			fatal(2, "restore %s: %v", path, err)
		}
	}()
	if err := os.WriteFile(path, []byte(apply(string(orig), m.Edits)), 0o644); err != nil {
		fatal(2, "%v", err)
	}
	runs := append([]Run(nil), m.Tests...)
	if !quick {
		seen := map[string]bool{}
		for _, r := range m.Tests {
			if r.Run == "" {
				seen[r.Pkg] = true
			}
		}
		for _, r := range m.Tests {
			if !seen[r.Pkg] {
				seen[r.Pkg] = true
				runs = append(runs, Run{Pkg: r.Pkg})
			}
		}
	}
	var flaky []string
	for _, r := range runs {
		for {
			out, code := goTest(tmp, r, flaky, timeout)
			if code == 0 {
				break
			}
			res := result{m: m, by: r.Pkg + " " + killer(out)}
			if strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]") {
				res.outcome, res.by = Broken, firstLine(out)
				return res.done(start, flaky)
			}
			// A red test kills the mutant only if it is red again when run
			// alone; one that passes then was a flake (the machine is
			// shared): it is skipped from then on, and the run repeated.
			names := topLevel(out)
			if len(names) == 0 { // a panic or timeout outside any test
				res.outcome = Killed
				return res.done(start, flaky)
			}
			if _, code := goTest(tmp, Run{Pkg: r.Pkg, Run: "^(" + strings.Join(names, "|") + ")$"}, nil, timeout); code != 0 {
				res.outcome = Killed
				return res.done(start, flaky)
			}
			flaky = append(flaky, names...)
		}
	}
	return result{m: m, outcome: Survived}.done(start, flaky)
}

func (r result) done(start time.Time, flaky []string) result {
	r.took = time.Since(start)
	if len(flaky) > 0 {
		r.by += " (flaky, passed alone, skipped: " + strings.Join(flaky, ", ") + ")"
	}
	return r
}

var topRE = regexp.MustCompile(`(?m)^--- FAIL: (Test\w*)`)

// topLevel names the failing top-level tests.
func topLevel(out string) []string {
	seen := map[string]bool{}
	var names []string
	for _, mm := range topRE.FindAllStringSubmatch(out, -1) {
		if !seen[mm[1]] {
			seen[mm[1]] = true
			names = append(names, mm[1])
		}
	}
	return names
}

// killer names the failing tests (the innermost first) or the panic.
func killer(out string) string {
	var names []string
	for _, mm := range failRE.FindAllStringSubmatch(out, -1) {
		names = append(names, mm[1])
	}
	if len(names) > 0 {
		sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
		if len(names) > 2 {
			names = append(names[:2], "...")
		}
		return strings.Join(names, ", ")
	}
	if i := strings.Index(out, "panic: "); i >= 0 {
		return firstLine(out[i:])
	}
	return firstLine(out)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

func goTest(dir string, r Run, skip []string, timeout time.Duration) (string, int) {
	args := []string{"test", "-count=1", "-failfast", "-timeout", timeout.String()}
	if r.Run != "" {
		args = append(args, "-run", r.Run)
	}
	if len(skip) > 0 {
		args = append(args, "-skip", "^("+strings.Join(skip, "|")+")$")
	}
	args = append(args, r.Pkg)
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	if err == nil {
		return buf.String(), 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return buf.String(), ee.ExitCode()
	}
	return buf.String() + err.Error(), 1
}

func gitRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("not in a git checkout: %v", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// copyTree copies the files git knows (tracked, and untracked ones that are
// not ignored) from root to dst.
func copyTree(root, dst string) error {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return err
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, f)
		info, err := os.Lstat(src)
		if err != nil {
			if os.IsNotExist(err) { // deleted in the working tree
				continue
			}
			return err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			return err
		}
		if err := copyFile(src, filepath.Join(dst, f), info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// report prints the per-mutation list and the per-file table in markdown.
func report(w io.Writer, rs []result) {
	type row struct{ n, killed, survived, equivalent, broken int }
	rows := map[string]*row{}
	var files []string
	total := &row{}
	for _, r := range rs {
		f := r.m.File
		if rows[f] == nil {
			rows[f] = &row{}
			files = append(files, f)
		}
		for _, x := range []*row{rows[f], total} {
			x.n++
			switch {
			case r.outcome == Killed:
				x.killed++
			case r.outcome == Broken:
				x.broken++
			case r.m.Equivalent != "":
				x.equivalent++
			default:
				x.survived++
			}
		}
	}
	fmt.Fprintf(w, "\n| file | mutations | killed | survived | equivalent |\n|---|---|---|---|---|\n")
	for _, f := range files {
		x := rows[f]
		fmt.Fprintf(w, "| `%s` | %d | %d | %d | %d |\n", f, x.n, x.killed, x.survived, x.equivalent)
	}
	fmt.Fprintf(w, "| **total** | %d | %d | %d | %d |\n", total.n, total.killed, total.survived, total.equivalent)
	if total.broken > 0 {
		fmt.Fprintf(w, "\n%d mutations did not compile (fix them):\n", total.broken)
	}
	score := 0.0
	if d := total.n - total.equivalent - total.broken; d > 0 {
		score = 100 * float64(total.killed) / float64(d)
	}
	fmt.Fprintf(w, "\nscore: %d killed of %d non-equivalent mutations (%.0f%%)\n", total.killed, total.n-total.equivalent-total.broken, score)
	for _, r := range rs {
		switch {
		case r.outcome == Broken:
			fmt.Fprintf(w, "BROKEN     %s: %s\n", r.m.Name, r.by)
		case r.outcome == Survived && r.m.Equivalent != "":
			fmt.Fprintf(w, "equivalent %s: %s\n", r.m.Name, r.m.Equivalent)
		case r.outcome == Survived:
			fmt.Fprintf(w, "SURVIVED   %s (%s): %s\n", r.m.Name, r.m.File, r.m.What)
		}
	}
}

func fatal(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mutate: "+format+"\n", args...)
	os.Exit(code)
}
