package cli

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// With --gateway URL the worker's and the operator's commands go through
// leasegate serve (the Go client, client/) instead of etcd: the caller holds
// no etcd credential, its identity is its client certificate (--cert, --key;
// --cacert verifies the gateway), and the gateway's config gives it its
// roles. Every command the API has a call for works through it, with the
// same output, exit codes and one-line refusals (the disposition travels in
// the gateway's Refusal detail); every other command that needs etcd is
// refused before any I/O.

// gatewayCommands are the commands that work through --gateway.
var gatewayCommands = "claim, commit, get, renew, release, run, status, list, watch, ops list/show/resolve, lease list/show/revoke and realm show/rotate"

func viaGateway(c *cli.Context) bool {
	g := globalsOf(c)
	return g != nil && g.gateway != ""
}

// notThroughGateway refuses a command that does not work through the
// gateway.
func notThroughGateway(c *cli.Context) error {
	return store.NewError(store.InvalidInput, commandName(c), "", "", fmt.Sprintf("%s does not work through --gateway (%s do); drop --gateway to use etcd directly", commandName(c), gatewayCommands), nil)
}

// withGateway runs one command's calls through the gateway, bounded by
// --command-timeout.
func withGateway(c *cli.Context, f func(ctx context.Context, gw *client.Client) error) error {
	return withGatewayClient(c, func(gw *client.Client) error {
		ctx, cancel := commandContext(c)
		defer cancel()
		return f(ctx, gw)
	})
}

// withGatewayClient runs f with a client of the gateway, its calls bounded
// by f itself (watch and run last until interrupted).
func withGatewayClient(c *cli.Context, f func(gw *client.Client) error) error {
	g := globalsOf(c)
	if g.tls == nil || c.String("cert") == "" {
		return store.NewError(store.InvalidInput, commandName(c), "", "", "--gateway needs --cert and --key (the gateway knows callers by their client certificates) and --cacert for its own", nil)
	}
	gw, err := client.New(g.gateway, g.tls)
	if err != nil {
		return err
	}
	defer gw.Close()
	return f(gw)
}

// claimViaGateway is claim through the gateway: a session of --ttl (not
// kept alive: it outlives this command and expires after --ttl unless
// renewed), and the task claimed on it. The owner label is the
// certificate's identity, so --owner is refused rather than ignored.
func claimViaGateway(c *cli.Context) error {
	op := commandName(c)
	if c.IsSet("owner") {
		return store.NewError(store.InvalidInput, op, "", "", "--owner cannot be given with --gateway: the owner is the identity of your certificate", nil)
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

func statusViaGateway(c *cli.Context, tenant, task string) error {
	return withGateway(c, func(ctx context.Context, gw *client.Client) error {
		o, err := gw.Owner(ctx, tenant, task)
		if err != nil {
			return err
		}
		return globalsOf(c).out.result(ownershipOutput{Disposition: ok, Ownership: o},
			table{header: ownershipHeader, rows: [][]string{ownershipRow(o)}})
	})
}

// watchViaGateway is watch through the gateway's ownership stream: the same
// rows, until interrupted. --metrics-addr measures this process's etcd
// requests, of which there are none through the gateway.
func watchViaGateway(c *cli.Context, tenant string) error {
	if c.IsSet("metrics-addr") {
		return store.NewError(store.InvalidInput, commandName(c), "", "", "--metrics-addr measures etcd requests, and through --gateway there are none; the gateway serves its own metrics", nil)
	}
	return withGatewayClient(c, func(gw *client.Client) error {
		out := globalsOf(c).out
		if !out.json {
			if err := out.stream(nil, []string{"EVENT", "TENANT", "TASK", "OWNER", "EPOCH", "LEASE", "REVISION"}, watchWidths); err != nil {
				return err
			}
		}
		return gw.Watch(c.Context, tenant, func(ev coordinator.OwnershipEvent) error {
			o := ev.Ownership
			row := []string{string(ev.Type), o.Tenant, o.Task, orDash(o.Owner), numOrDash(o.Epoch), leaseOrDash(o.Lease), num(o.Revision)}
			return out.stream(eventOutput{Disposition: ok, OwnershipEvent: ev}, row, watchWidths)
		})
	})
}

func opsListViaGateway(c *cli.Context, tenant, task string, state ledger.State) error {
	return withGateway(c, func(ctx context.Context, gw *client.Client) error {
		recs, err := gw.List(ctx, tenant, task, state)
		if err != nil {
			return err
		}
		if recs == nil {
			recs = []ledger.Record{}
		}
		return globalsOf(c).out.result(opsListOutput{Disposition: ok, Records: recs}, recordsTable(recs))
	})
}

func opsShowViaGateway(c *cli.Context, tenant, task, operation string) error {
	return withGateway(c, func(ctx context.Context, gw *client.Client) error {
		rec, journal, err := gw.Record(ctx, tenant, task, operation)
		if err != nil {
			return err
		}
		return printRecord(c, tenant, task, operation, rec, journal)
	})
}

// opsResolveViaGateway is ops resolve through the gateway, which fences the
// transition with the task's current grant, refuses it unless --grant is
// that grant (as --endpoints does: an operator resolving with a stale grant
// is refused), and journals the caller's certificate identity as approver.
func opsResolveViaGateway(c *cli.Context, g coordinator.Grant, operation string, to ledger.State, ev ledger.Evidence, why string) error {
	return withGateway(c, func(ctx context.Context, gw *client.Client) error {
		rec, err := gw.ResolveUnder(ctx, g, operation, to, ev, why)
		if err != nil {
			return err
		}
		return globalsOf(c).out.result(opsRecordOutput{Disposition: ok, Record: rec}, recordTable(rec))
	})
}

func leaseRevokeViaGateway(c *cli.Context, id int64) error {
	if c.Bool("force") {
		return store.NewError(store.InvalidInput, commandName(c), "", "", "--force cannot be given with --gateway: the gateway revokes only leasegate leases of its keyspace", nil)
	}
	return withGateway(c, func(ctx context.Context, gw *client.Client) error {
		li, err := gw.RevokeLease(ctx, id)
		if err != nil {
			return notOwnerLeaseAdvice(err)
		}
		return printRevoked(c, revokeOutputOf(id, li))
	})
}

func realmShowViaGateway(c *cli.Context) error {
	return withGateway(c, func(ctx context.Context, gw *client.Client) error {
		chk, err := gw.ShowRealm(ctx)
		if err != nil {
			return err
		}
		return printRealm(c, chk)
	})
}

func realmRotateViaGateway(c *cli.Context) error {
	return withGateway(c, func(ctx context.Context, gw *client.Client) error {
		chk, err := gw.ShowRealm(ctx)
		if err != nil {
			return err
		}
		old := chk.Realm
		r, err := gw.RotateRealm(ctx)
		if err != nil {
			return err
		}
		return globalsOf(c).out.result(realmOutput{Disposition: ok, Realm: r, PreviousRealm: old},
			table{header: []string{"REALM", "PREVIOUS-REALM"}, rows: [][]string{{r, old}}})
	})
}
