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
