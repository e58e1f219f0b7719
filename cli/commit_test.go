package cli_test

import (
	"os"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
)

// TestCommitValueFile: --value-file takes any bytes, from a file or stdin,
// and stores them exactly.
func TestCommitValueFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, grant := e.claim(t, "tenant", "task", "owner", "30s")
	binary := make([]byte, 0, 512)
	for i := range 512 {
		binary = append(binary, byte(i))
	}
	path := e.dir + "/value.bin"
	if err := os.WriteFile(path, binary, 0o600); err != nil {
		t.Fatal(err)
	}
	want(t, e.lg(t, "commit", "--grant", grant, "--operation", "op-1", "--value-file", path, "--expected-version", "0"),
		cli.ExitDone, coordinator.Committed)
	if got := e.stateValue(t, "tenant", "task"); string(got) != string(binary) {
		t.Fatalf("stored %d bytes %q, want the file's %d", len(got), got, len(binary))
	}
	r := e.exec(t, call{args: []string{"commit", "--grant", grant, "--operation", "op-2", "--value-file", "-", "--expected-version", "1"},
		stdin: "from stdin\x00"})
	want(t, r, cli.ExitDone, coordinator.Committed)
	if got := e.stateValue(t, "tenant", "task"); string(got) != "from stdin\x00" {
		t.Fatalf("stored %q", got)
	}
	// An explicitly empty value is a value.
	want(t, e.lg(t, "commit", "--grant", grant, "--operation", "op-3", "--value", "", "--expected-version", "2"),
		cli.ExitDone, coordinator.Committed)
	if got := e.stateValue(t, "tenant", "task"); len(got) != 0 {
		t.Fatalf("stored %q", got)
	}
}
