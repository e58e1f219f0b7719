package cli

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
)

// With --gateway URL a worker's commands go through leasegate serve (the Go
// client, client/) instead of etcd: the caller holds no etcd credential, its
// identity is its client certificate (--cert, --key; --cacert verifies the
// gateway). claim, commit, get and release work through it; every other
// command that needs etcd is refused before any I/O.

// gatewayCommands are the commands that work through --gateway.
var gatewayCommands = "claim, commit, get and release"

func viaGateway(c *cli.Context) bool {
	g := globalsOf(c)
	return g != nil && g.gateway != ""
}

// notThroughGateway refuses a command that does not work through the
// gateway.
func notThroughGateway(c *cli.Context) error {
	return coordinator.Invalid(commandName(c), "%s does not work through --gateway (%s do); drop --gateway to use etcd directly",
		commandName(c), gatewayCommands)
}

// withGateway runs one command's calls through the gateway, bounded by
// --command-timeout.
func withGateway(c *cli.Context, f func(ctx context.Context, gw *client.Client) error) error {
	g := globalsOf(c)
	if g.tls == nil || c.String("cert") == "" {
		return coordinator.Invalid(commandName(c), "--gateway needs --cert and --key (the gateway knows callers by their client certificates) and --cacert for its own")
	}
	gw, err := client.New(g.gateway, g.tls)
	if err != nil {
		return err
	}
	defer gw.Close()
	ctx, cancel := commandContext(c)
	defer cancel()
	return f(ctx, gw)
}

// claimViaGateway is claim through the gateway: a session of --ttl (not
// kept alive: it outlives this command and expires after --ttl unless
// renewed), and the task claimed on it. The owner label is the
// certificate's identity, so --owner is refused rather than ignored.
func claimViaGateway(c *cli.Context) error {
	op := commandName(c)
	if c.IsSet("owner") {
		return coordinator.Invalid(op, "--owner cannot be given with --gateway: the owner is the identity of your certificate")
	}
	l, err := labels(c, "tenant", "task")
	if err != nil {
		return err
	}
	ttl, err := ttlOf(c)
	if err != nil {
		return err
	}
	return withGateway(c, func(ctx context.Context, gw *client.Client) error {
		s, err := gw.OpenSession(ctx, ttl)
		if err != nil {
			return err
		}
		g, err := s.Claim(ctx, l[0], l[1])
		if err != nil {
			rctx, rcancel := cleanupContext(c)
			defer rcancel()
			if cerr := s.Close(rctx); cerr != nil {
				return fmt.Errorf("%w (and the session's lease was not revoked: %v)", err, cerr)
			}
			return err
		}
		return globalsOf(c).out.result(grantOutput{Disposition: coordinator.Granted, Grant: g}, grantTable(coordinator.Granted, g))
	})
}
