package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
)

// TestStatusAndList: the ownership views in JSON and as tables, for an
// owned task with a committed state and for a released one.
func TestStatusAndList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owned, ownedFile := e.claim(t, "acme", "invoices", "worker-1", "30s")
	want(t, e.lg(t, "commit", "--grant", ownedFile, "--operation", "op-1", "--value", "paid", "--expected-version", "0"),
		cli.ExitDone, coordinator.Committed)
	_, doneFile := e.claim(t, "acme", "payroll", "worker-2", "30s")
	want(t, e.lg(t, "release", "--grant", doneFile), cli.ExitDone, coordinator.Released)
	e.claim(t, "other", "task", "worker-3", "30s")

	t.Run("status json", func(t *testing.T) {
		var out struct {
			Disposition string                `json:"disposition"`
			Ownership   coordinator.Ownership `json:"ownership"`
		}
		decode(t, e.lg(t, "status", "--tenant", "acme", "--task", "invoices"), &out)
		o := out.Ownership
		if out.Disposition != "ok" || o.Owner != "worker-1" || o.Epoch != owned.Epoch || o.Lease != owned.Lease ||
			o.TTLLeft <= 0 || o.TTLLeft > 30 || o.StateVersion != 1 || o.LastOperation != "op-1" {
			t.Fatalf("status %+v", out)
		}
	})
	t.Run("status of a never-claimed task", func(t *testing.T) {
		r := e.lg(t, "status", "--tenant", "acme", "--task", "nothing", "-o", "table")
		if r.code != 0 || !strings.Contains(r.stdout, "acme    nothing  -      -      -      -    0") {
			t.Fatalf("exit %d\n%s", r.code, r.stdout)
		}
	})
	t.Run("list json, one tenant", func(t *testing.T) {
		var out struct {
			Disposition string                  `json:"disposition"`
			Tasks       []coordinator.Ownership `json:"tasks"`
		}
		decode(t, e.lg(t, "list", "--tenant", "acme"), &out)
		if out.Disposition != "ok" || len(out.Tasks) != 2 || out.Tasks[0].Task != "invoices" || out.Tasks[1].Task != "payroll" ||
			out.Tasks[1].Owned() || out.Tasks[1].Fence == 0 {
			t.Fatalf("list %+v", out)
		}
	})
	t.Run("list table, every tenant", func(t *testing.T) {
		r := e.lg(t, "list", "-o", "table")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 4 {
			t.Fatalf("exit %d\n%s", r.code, r.stdout)
		}
		wantFields(t, lines[0], "TENANT", "TASK", "OWNER", "EPOCH", "LEASE", "TTL", "STATE-VERSION", "LAST-OPERATION")
		f := strings.Fields(lines[1])
		if len(f) != 8 || f[0] != "acme" || f[1] != "invoices" || f[2] != "worker-1" || f[3] != strconv.FormatInt(owned.Epoch, 10) ||
			f[4] != fmt.Sprintf("%016x", owned.Lease) || !strings.HasSuffix(f[5], "s") || f[6] != "1" || f[7] != "op-1" {
			t.Fatalf("owned row %q", lines[1])
		}
		wantFields(t, lines[2], "acme", "payroll", "-", "-", "-", "-", "0", "-")
		if !strings.HasPrefix(lines[3], "other") {
			t.Fatalf("third row %q", lines[3])
		}
	})
}

func wantFields(t *testing.T, line string, want ...string) {
	t.Helper()
	if got := strings.Fields(line); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("row %q, want fields %q", line, want)
	}
}

// TestWatch streams owned, claimed and vacated events, then ends cleanly
// when interrupted.
func TestWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, first := e.claim(t, "acme", "a", "w1", "30s")
	b := e.start(t, "watch", "--tenant", "acme")
	b.stdout.waitFor(t, `"type":"owned"`)
	second, _ := e.claim(t, "acme", "b", "w2", "30s")
	e.claim(t, "elsewhere", "c", "w3", "30s") // another tenant: not shown
	b.stdout.waitFor(t, `"type":"claimed"`)
	want(t, e.lg(t, "release", "--grant", first), cli.ExitDone, coordinator.Released)
	out := b.stdout.waitFor(t, `"type":"vacated"`)
	b.cancel()
	if r := b.wait(t); r.code != 0 || r.stderr != "" {
		t.Fatalf("watch after interrupt: exit %d, stderr %q", r.code, r.stderr)
	}
	var events []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev struct {
			Disposition string                `json:"disposition"`
			Type        string                `json:"type"`
			Ownership   coordinator.Ownership `json:"ownership"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Disposition != "ok" {
			t.Fatalf("event %q: %v", line, err)
		}
		events = append(events, fmt.Sprintf("%s %s/%s %s", ev.Type, ev.Ownership.Tenant, ev.Ownership.Task, ev.Ownership.Owner))
		if ev.Type == "claimed" && ev.Ownership.Epoch != second.Epoch {
			t.Fatalf("claimed event %+v, want epoch %d", ev, second.Epoch)
		}
	}
	if got, want := strings.Join(events, "; "), "owned acme/a w1; claimed acme/b w2; vacated acme/a w1"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}

	t.Run("table", func(t *testing.T) {
		b := e.start(t, "watch", "-o", "table")
		out := b.stdout.waitFor(t, "elsewhere")
		b.cancel()
		b.wait(t)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		wantFields(t, lines[0], "EVENT", "TENANT", "TASK", "OWNER", "EPOCH", "LEASE", "REVISION")
		if f := strings.Fields(lines[1]); len(f) != 7 || f[0] != "owned" || f[1] != "acme" || f[2] != "b" || f[3] != "w2" {
			t.Fatalf("first event row %q", lines[1])
		}
		// Rows printed apart line up under the header, 16-digit lease IDs
		// included.
		lease, revision := strings.Index(lines[0], "LEASE"), strings.Index(lines[0], "REVISION")
		for _, row := range lines[1:] {
			f := strings.Fields(row)
			if len(f[5]) != 16 || strings.Index(row, " "+f[5]+" ")+1 != lease || !strings.HasSuffix(row, " "+f[6]) ||
				strings.LastIndex(row, " "+f[6])+1 != revision {
				t.Fatalf("row %q does not line up with the header %q", row, lines[0])
			}
		}
	})
}

// TestLeaseRevoke: the operator's forced expiry names what it vacated; a
// lease already gone is refused (exit 1); hex IDs as etcdctl prints them
// are accepted.
func TestLeaseRevoke(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, _ := e.claim(t, "acme", "invoices", "worker-1", "30s")
	hex := fmt.Sprintf("%016x", g.Lease) // as status and etcdctl print it
	r := e.lg(t, "lease", "revoke", "--lease", hex)
	obj := want(t, r, cli.ExitDone, "ok")
	if obj["lease"] != fmt.Sprintf("%016x", g.Lease) || fmt.Sprint(obj["vacated"]) != "[map[task:invoices tenant:acme]]" {
		t.Fatalf("revoke printed %v", obj)
	}
	if o, err := e.co.Owner(t.Context(), "acme", "invoices"); err != nil || o.Owned() {
		t.Fatalf("after revoke: %+v, %v", o, err)
	}
	e.writesNothing(t, "a refused revoke", func() {
		r := e.lg(t, "lease", "revoke", "--lease", strconv.FormatInt(g.Lease, 10))
		wantOperatorAdvice(t, r, cli.ExitRefused, coordinator.ExpiredOwner, "etcd no longer knows this lease")
		if !strings.Contains(r.stderr, "nothing to revoke") {
			t.Fatalf("stderr %q", r.stderr)
		}
	})

	// --grant revokes the grant's lease: claim's output is accepted as is.
	g2, file := e.claim(t, "acme", "invoices", "worker-2", "30s")
	r = e.lg(t, "lease", "revoke", "--grant", file)
	if obj := want(t, r, cli.ExitDone, "ok"); obj["lease"] != fmt.Sprintf("%016x", g2.Lease) {
		t.Fatalf("revoke --grant printed %v", obj)
	}
	if o, err := e.co.Owner(t.Context(), "acme", "invoices"); err != nil || o.Owned() {
		t.Fatalf("after revoke --grant: %+v, %v", o, err)
	}
	e.writesNothing(t, "an invalid revoke", func() {
		want(t, e.lg(t, "lease", "revoke", "--grant", file, "--lease", "1"), cli.ExitInvalid, coordinator.InvalidInput)
		want(t, e.lg(t, "lease", "revoke", "--grant", e.file(t, "{}")), cli.ExitInvalid, coordinator.InvalidInput)
	})

	// The table says the lease is revoked, not the TTL it had before.
	g3, _ := e.claim(t, "acme", "invoices", "worker-3", "30s")
	r = e.lg(t, "-o", "table", "lease", "revoke", "--lease", coordinator.FormatLeaseID(g3.Lease))
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.Contains(lines[1], "revoked (") || !strings.Contains(lines[1], "s were left)") {
		t.Fatalf("revoke table:\n%s", r.stdout)
	}
}

// TestTableOutput: the grant commands' tables, the realm, and a refusal in
// table mode (nothing on stdout, one line on stderr).
func TestTableOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, grant := e.claim(t, "acme", "invoices", "worker-1", "30s")
	r := e.lg(t, "renew", "--grant", grant, "-o", "table")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("renew: exit %d\n%s", r.code, r.stdout)
	}
	wantFields(t, lines[0], "DISPOSITION", "TENANT", "TASK", "OWNER", "EPOCH", "LEASE", "REALM")
	wantFields(t, lines[1], "renewed", "acme", "invoices", "worker-1", strconv.FormatInt(g.Epoch, 10), fmt.Sprintf("%016x", g.Lease), g.Realm)

	r = e.lg(t, "commit", "--grant", grant, "--operation", "op-1", "--value", "v", "--expected-version", "0", "-o", "table")
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	wantFields(t, lines[0], "DISPOSITION", "TENANT", "TASK", "OPERATION", "VERSION", "EPOCH", "REVISION")
	if f := strings.Fields(lines[1]); f[0] != "committed" || f[4] != "1" {
		t.Fatalf("commit row %q", lines[1])
	}

	r = e.lg(t, "realm", "show", "-o", "table")
	if r.stdout != "REALM\n"+e.co.Realm()+"\n" {
		t.Fatalf("realm show %q", r.stdout)
	}

	r = e.lg(t, "claim", "--tenant", "acme", "--task", "invoices", "--owner", "worker-2", "-o", "table")
	if r.code != cli.ExitRefused || r.stdout != "" {
		t.Fatalf("busy in table mode: exit %d, stdout %q", r.code, r.stdout)
	}
	wantRefusalLine(t, r, coordinator.Busy)
	if !strings.Contains(r.stderr, `held by "worker-1" since epoch `+strconv.FormatInt(g.Epoch, 10)) {
		t.Fatalf("busy does not name the holder: %q", r.stderr)
	}
}

// TestGrantFromStdin: --grant - reads claim's output or a bare grant.
func TestGrantFromStdin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, grant := e.claim(t, "acme", "invoices", "worker-1", "30s")
	bare, _ := json.Marshal(g)
	for i, stdin := range []string{readFile(t, grant), string(bare)} {
		r := e.exec(t, call{stdin: stdin, args: []string{"commit", "--grant", "-", "--operation", "op",
			"--value", "v", "--expected-version", "0"}})
		d := coordinator.Committed
		if i > 0 {
			d = coordinator.HistoricalRetry
		}
		want(t, r, cli.ExitDone, d)
	}
}

// TestHelpAndCompletion: every command's help has an example, and shell
// completion lists the commands.
func TestHelpAndCompletion(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{{"etcd"}, {"claim"}, {"renew"}, {"release"}, {"commit"}, {"status"}, {"list"},
		{"watch"}, {"lease", "revoke"}, {"realm", "show"}, {"realm", "rotate"}, {"run"}} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			t.Parallel()
			r := execApp(t, call{}, append(cmd, "--help")...)
			_, example, _ := strings.Cut(r.stdout, "Example:\n      leasegate ")
			example, _, _ = strings.Cut(example, "\n")
			if r.code != 0 || !strings.Contains(example, cmd[len(cmd)-1]) || r.stderr != "" {
				t.Fatalf("no example of %s: exit %d\n%s%s", cmd, r.code, r.stdout, r.stderr)
			}
			h := execApp(t, call{}, append([]string{"help"}, cmd...)...)
			if h.stdout != r.stdout {
				t.Fatalf("'help %s' differs from '--help'", strings.Join(cmd, " "))
			}
		})
	}
	t.Run("completion", func(t *testing.T) {
		t.Parallel()
		out := asProcess(t, nil, "--generate-bash-completion")
		for _, cmd := range []string{"claim", "commit", "run", "realm", "lease"} {
			if !strings.Contains(out, cmd+"\n") {
				t.Fatalf("completion lacks %s:\n%s", cmd, out)
			}
		}
		if out := asProcess(t, nil, "realm", "--generate-bash-completion"); out != "show\nrotate\n" {
			t.Fatalf("realm completion %q", out)
		}
		if out := asProcess(t, nil, "claim", "--te", "--generate-bash-completion"); out != "--tenant\n" {
			t.Fatalf("flag completion %q", out)
		}
	})
}

// asProcess runs the test binary as leasegate with args and env added to
// its environment, and returns its stdout; it must exit 0.
func asProcess(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asBinary+"=1"), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("leasegate %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}
