// Package cli is leasegate's operator tool: claim, commit, inspect and run
// under a lease from a shell, against etcd.
//
// New builds the urfave/cli application. Every command is a named action in
// the file of its noun (claim.go: claim, renew, release; commit.go; status.go;
// list.go; watch.go; get.go; lease.go: list, show, revoke; realm.go; run.go;
// etcd.go; version.go; ops.go: the effect ledger; gc.go: retention). Results go
// through one printer (printer.go) to App.Writer — a table for people, one
// JSON object per result with a "disposition" field for scripts — and every
// error is reported once and mapped to an exit code in exit.go. Nothing here
// calls os.Exit: cli/leasegate/main.go does, with ExitCode.
//
// Guarantees: bad input (labels, TTLs, versions, grant files, flags) is
// refused with exit 2 before any connection to etcd; a request that never
// reached etcd is exit 3 (a hold), never a refusal; a refusal is exit 1 and
// prints one line on stderr naming the disposition and what to do next.
//
// Non-guarantees: the CLI holds no authority of its own. A grant file is
// evidence to be checked by etcd at every use; `run` stops its child when it
// learns that ownership is lost, which is after etcd has already moved on —
// the fence in every protected commit is what keeps a late child harmless.
package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// Defaults of the global flags.
const (
	defaultEndpoint       = "127.0.0.1:2379"
	defaultDialTimeout    = 2 * time.Second
	defaultCommandTimeout = 5 * time.Second
)

// New builds the leasegate application. Its Writer, ErrWriter and Reader
// default to the process's stdout, stderr and stdin; set them to run the app
// in-process. Run it with RunContext and map the error with ExitCode.
func New() *cli.App {
	app := &cli.App{
		Name:  "leasegate",
		Usage: "etcd-backed leases and fences: claim, commit, inspect and run under a lease",
		Description: wrap("leasegate answers one question at the moment a protected write happens: is this "+
			"actor, right now, the current owner of this task? "+exitCodesHelp(), 80) + `

Example:
   leasegate etcd --data-dir /tmp/lg.etcd &
   leasegate -o json claim --tenant acme --task invoices --owner worker-1 --ttl 30s > grant.json
   leasegate commit --grant grant.json --operation op-1 --value paid --expected-version 0
   leasegate list`,
		Flags:                append(globalFlags(), helpFlag(), versionFlag()),
		EnableBashCompletion: true,
		HideHelp:             true,
		HideHelpCommand:      true,
		Before:               setup,
		Action:               rootAction,
		ExitErrHandler:       report,
		OnUsageError:         usageError,
		HideVersion:          true,
		Commands: []*cli.Command{
			etcdCommand(),
			claimCommand(),
			renewCommand(),
			releaseCommand(),
			commitCommand(),
			statusCommand(),
			getCommand(),
			listCommand(),
			watchCommand(),
			leaseCommand(),
			realmCommand(),
			gcCommand(),
			opsCommand(),
			runCommand(),
			benchCommand(),
			versionCommand(),
			drillCommand(),
			serveCommand(),
			helpCommand(),
		},
	}
	for _, c := range app.Commands {
		prepare(c, app.Name)
	}
	return app
}

// prepare gives every command the app's handling of usage errors and an
// action for unknown subcommands, so that urfave never prints a usage dump
// to stdout or exits with a code of its own; and every leaf command its own
// -o/--output, so that `leasegate claim ... -o json` works as well as
// `leasegate -o json claim ...`.
//
// urfave's own help flag and help command are package variables that every
// app writes to when it runs, so two apps running at once in one process
// (tests) race: each command gets a help flag of its own instead.
func prepare(c *cli.Command, parent string) {
	c.OnUsageError = usageError
	path := parent + " " + c.Name
	if parent != "leasegate" {
		c.HelpName = path // the app names its own commands; help may show a subcommand never run
	}
	c.HideHelp, c.HideHelpCommand = true, true
	c.Flags = append(c.Flags, helpFlag())
	if len(c.Subcommands) > 0 {
		if c.Action == nil {
			c.Action = groupAction
		}
		for _, s := range c.Subcommands {
			prepare(s, path)
		}
		return
	}
	c.Flags = append(c.Flags, &cli.StringFlag{Name: "output", Aliases: []string{"o"},
		Usage: "output format: table or json (overrides the global -o)"})
	c.Before = commandOutput
}

// commandOutput is every leaf command's Before: a -o given after the
// command overrides the global one. It is checked before any I/O.
func commandOutput(c *cli.Context) error {
	format := c.String("output")
	if format == "" {
		return nil
	}
	out, err := newPrinter(c.App.Writer, format)
	if err != nil {
		return store.NewError(store.InvalidInput, commandName(c), "", "", fmt.Sprintf("%v", err), nil)
	}
	g := *globalsOf(c)
	g.out = out
	c.Context = context.WithValue(c.Context, globalsKey{}, &g)
	return nil
}

// The environment variables credentials are read from; `run` removes them
// from its child's environment.
const (
	envUser     = "LEASEGATE_USER"
	envPassword = "LEASEGATE_PASSWORD"
)

var credentialEnv = []string{envUser, envPassword}

func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "endpoints", Usage: "etcd endpoints, comma-separated", Value: cli.NewStringSlice(defaultEndpoint), EnvVars: []string{endpointsEnv}},
		&cli.StringFlag{Name: "prefix", Usage: "key prefix of leasegate's keyspace", Value: coordinator.DefaultPrefix, EnvVars: []string{"LEASEGATE_PREFIX"}},
		&cli.DurationFlag{Name: "dial-timeout", Usage: "how long to wait for a connection to etcd", Value: defaultDialTimeout},
		&cli.DurationFlag{Name: "command-timeout", Usage: "how long one command may wait for etcd's answers", Value: defaultCommandTimeout},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output format: table or json", Value: formatTable},
		&cli.StringFlag{Name: "cacert", Usage: "verify etcd's certificates with this CA bundle", TakesFile: true},
		&cli.StringFlag{Name: "cert", Usage: "client TLS certificate file", TakesFile: true},
		&cli.StringFlag{Name: "key", Usage: "client TLS key file", TakesFile: true},
		&cli.StringFlag{Name: "user", Usage: "etcd user name, or name:password", EnvVars: []string{envUser}},
		&cli.StringFlag{Name: "password", Usage: "etcd password (prefer the environment variable)", EnvVars: []string{envPassword}},
		&cli.StringFlag{Name: "log-level", Usage: "log level on stderr: debug, info, warn or error", Value: "error"},
		&cli.StringFlag{Name: "gateway", Usage: "act through the gateway at this `URL` (leasegate serve) instead of etcd: every command of workers and operators (claim, commit, get, renew, release, run, status, list, watch, ops, lease, realm) but gc; --cacert, --cert and --key are then the gateway's (docs/gateway.md)"},
	}
}

func helpFlag() cli.Flag {
	return &cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help"}
}

// versionFlag is the global --version: `leasegate version`'s output.
func versionFlag() cli.Flag {
	return &cli.BoolFlag{Name: "version", Usage: "print the version (as 'leasegate version') and exit"}
}

func helpCommand() *cli.Command {
	return &cli.Command{
		Name:        "help",
		Usage:       "show the commands, or one command's help",
		ArgsUsage:   "[COMMAND [SUBCOMMAND]]",
		Description: example("Shows the list of commands, or the help of one.", "leasegate help run", "leasegate help realm rotate"),
		Action:      help,
	}
}

// help shows the app's help, or that of the command its arguments name.
func help(c *cli.Context) error {
	args := c.Args().Slice()
	if len(args) == 0 {
		return cli.ShowAppHelp(c.Lineage()[1])
	}
	cmd := c.App.Command(args[0])
	for _, sub := range args[1:] {
		if cmd == nil {
			break
		}
		cmd = cmd.Command(sub)
	}
	if cmd == nil {
		return store.NewError(store.InvalidInput, "help", "", "", fmt.Sprintf("no command %q; see 'leasegate --help'", strings.Join(args, " ")), nil)
	}
	tmpl := cli.CommandHelpTemplate
	if len(cmd.Subcommands) > 0 {
		tmpl = cli.SubcommandHelpTemplate
	}
	cli.HelpPrinter(c.App.Writer, tmpl, cmd)
	return nil
}

// rootAction runs when no command is named: the version with --version,
// help, or a usage error for an unknown command.
func rootAction(c *cli.Context) error {
	if c.Bool("version") {
		if err := noArgs(c); err != nil {
			return err
		}
		return printVersion(c)
	}
	if c.Args().Present() {
		return store.NewError(store.InvalidInput, "leasegate", "", "", fmt.Sprintf("unknown command %q; see 'leasegate --help'", c.Args().First()), nil)
	}
	return cli.ShowAppHelp(c)
}

// groupAction runs for a command group (lease, realm) named without a known
// subcommand.
func groupAction(c *cli.Context) error {
	if c.Args().Present() {
		return store.NewError(store.InvalidInput, commandName(c), "", "", fmt.Sprintf("unknown command %q; see '%s %s --help'", c.Args().First(), c.App.Name, commandName(c)), nil)
	}
	return cli.ShowSubcommandHelp(c)
}

// usageError turns urfave's flag-parsing errors into invalid_input.
// At the top level c.Command is the app's own root command, named like the
// app: it is not named twice.
func usageError(c *cli.Context, err error, _ bool) error {
	name := commandName(c)
	help := strings.TrimSpace(c.App.Name + " " + name)
	if name == "" {
		name = c.App.Name
	}
	return store.NewError(store.InvalidInput, name, "", "", fmt.Sprintf("%v%s; see '%s --help'", err, durationHint(c, err), help), nil)
}

// commandName is the command's path below the app ("lease revoke"), "" for
// the app itself. urfave's FullName names a subcommand without its group
// ("revoke") until it runs; prepare gives every command its full HelpName.
func commandName(c *cli.Context) string {
	if c.Command == nil || c.Command.Name == "" || c.Command.Name == c.App.Name {
		return ""
	}
	if name, ok := strings.CutPrefix(c.Command.HelpName, c.App.Name+" "); ok {
		return name
	}
	return c.Command.Name
}

// noArgs refuses stray positional arguments: a mistyped flag must not be
// silently ignored.
func noArgs(c *cli.Context) error {
	if c.Args().Present() {
		return store.NewError(store.InvalidInput, commandName(c), "", "", fmt.Sprintf("unexpected argument %q; see '%s %s --help'", c.Args().First(), c.App.Name, commandName(c)), nil)
	}
	return nil
}

// wrap fills text into lines of at most width characters.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(text) {
		switch {
		case n == 0:
		case n+1+len(w) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}

// example formats a command's description with its examples.
func example(what string, lines ...string) string {
	return fmt.Sprintf("%s\n\nExample:\n   %s", what, strings.Join(lines, "\n   "))
}
