package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
)

// TestEtcdCommand runs `leasegate etcd` in-process on free ports, uses it
// with the other commands, and shuts it down by cancelling its context (as
// SIGINT does in the binary): exit 0. Starting it on a port in use says
// so (exit 2: pick another port), not "hold and retry later".
func TestEtcdCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"-o", "json", "etcd", "--data-dir", dir + "/etcd",
		"--listen-client", "http://127.0.0.1:0", "--listen-peer", "http://127.0.0.1:0"}
	b := startApp(t, args...)
	line := b.stdout.waitFor(t, "\n")
	var ready struct {
		Disposition string   `json:"disposition"`
		Endpoints   []string `json:"endpoints"`
		DataDir     string   `json:"data_dir"`
	}
	if err := json.Unmarshal([]byte(line), &ready); err != nil || ready.Disposition != "ok" || len(ready.Endpoints) != 1 ||
		!strings.HasPrefix(ready.Endpoints[0], "http://127.0.0.1:") || ready.DataDir != dir+"/etcd" {
		t.Fatalf("ready line %q: %+v, %v", line, ready, err)
	}

	e := newEnvAt(t, ready.Endpoints...)
	e.claim(t, "tenant", "task", "owner", "1s") // the local etcd's minimum lease TTL is 1s
	r := e.lg(t, "list")
	obj := want(t, r, cli.ExitDone, "ok")
	if tasks, _ := obj["tasks"].([]any); len(tasks) != 1 {
		t.Fatalf("list after claim: %s", r.stdout)
	}

	t.Run("a port in use says so", func(t *testing.T) {
		port := strings.TrimPrefix(ready.Endpoints[0], "http://")
		r := execApp(t, call{}, "-o", "json", "etcd", "--data-dir", t.TempDir(),
			"--listen-client", "http://"+port, "--listen-peer", "http://127.0.0.1:0")
		want(t, r, cli.ExitInvalid, coordinator.InvalidInput)
		if !strings.Contains(r.stderr, "the address is in use") || strings.Contains(r.stderr, "retry later") {
			t.Fatalf("stderr %q does not say the address is in use", r.stderr)
		}
	})

	b.cancel()
	if r := b.wait(t); r.code != cli.ExitDone || r.stderr != "" {
		t.Fatalf("etcd after cancel: exit %d, stderr %q", r.code, r.stderr)
	}
}
