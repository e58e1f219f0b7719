package cli_test

import (
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
)

// TestUsageErrorsPointAtTheirOwnHelp: a usage error of any command — an
// unknown flag, a stray argument, an unknown subcommand — names that
// command's help by its full path ('leasegate lease revoke --help', not
// 'leasegate revoke --help'). The commands are read from the app itself.
func TestUsageErrorsPointAtTheirOwnHelp(t *testing.T) {
	t.Parallel()
	type tc struct {
		args []string
		help string
	}
	var cases []tc
	var walk func(path []string, cmds []*ucli.Command)
	walk = func(path []string, cmds []*ucli.Command) {
		for _, c := range cmds {
			p := append(append([]string{}, path...), c.Name)
			help := "see 'leasegate " + strings.Join(p, " ") + " --help'"
			if len(c.Subcommands) > 0 {
				cases = append(cases, tc{append(p, "no-such-command"), help})
				walk(p, c.Subcommands)
				continue
			}
			cases = append(cases, tc{append(p, "--no-such-flag"), help})
		}
	}
	walk(nil, cli.New().Commands)
	cases = append(cases,
		tc{[]string{"lease", "revoke", "123"}, "see 'leasegate lease revoke --help'"},
		tc{[]string{"lease", "show", "1", "2"}, "see 'leasegate lease show --help'"},
		tc{[]string{"realm", "show", "extra"}, "see 'leasegate realm show --help'"})
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			r := execApp(t, call{}, append([]string{"-o", "json", "--endpoints", "127.0.0.1:1"}, c.args...)...)
			want(t, r, cli.ExitInvalid, coordinator.InvalidInput)
			if !strings.Contains(r.stderr, c.help) {
				t.Fatalf("stderr %q does not say %q", r.stderr, c.help)
			}
		})
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
