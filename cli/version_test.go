package cli_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
)

// TestVersion: `leasegate version` and the global --version print the same
// versions: the Go toolchain's and the etcd client's from the build info.
func TestVersion(t *testing.T) {
	t.Parallel()
	var outs []map[string]any
	for _, args := range [][]string{{"-o", "json", "version"}, {"-o", "json", "--version"}, {"version", "-o", "json"}} {
		r := execApp(t, call{}, args...)
		outs = append(outs, want(t, r, cli.ExitDone, "ok"))
	}
	v := outs[0]
	if v["go_version"] != runtime.Version() || !strings.HasPrefix(v["etcd_client"].(string), "v3.") || v["version"] == "" ||
		v["vcs_revision"] == "" || v["platform"] != runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("version %v", v)
	}
	for _, o := range outs[1:] {
		for k := range v {
			if o[k] != v[k] {
				t.Fatalf("%s: %v, want %v (as 'leasegate version')", k, o[k], v[k])
			}
		}
	}
	t.Run("table", func(t *testing.T) {
		r := execApp(t, call{}, "version")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "VERSION") || !strings.Contains(lines[1], runtime.Version()) {
			t.Fatalf("exit %d\n%s", r.code, r.stdout)
		}
	})
}

// TestUsageHintNamesTheAppOnce: a usage error at the top level points to
// 'leasegate --help', not 'leasegate leasegate --help'.
func TestUsageHintNamesTheAppOnce(t *testing.T) {
	t.Parallel()
	r := execApp(t, call{}, "--no-such-flag")
	if r.code != cli.ExitInvalid || !strings.Contains(r.stderr, "see 'leasegate --help'") || strings.Contains(r.stderr, "leasegate leasegate") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	r = execApp(t, call{}, "claim", "--no-such-flag")
	if r.code != cli.ExitInvalid || !strings.Contains(r.stderr, "see 'leasegate claim --help'") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}
