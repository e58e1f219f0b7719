package cli

import (
	"context"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
)

// The grant's life from a shell: claim, renew, release.

func claimCommand() *cli.Command {
	return &cli.Command{
		Name:  "claim",
		Usage: "grant a fresh lease and claim a task with it",
		Description: example(`Grants a lease of --ttl and claims the task on it in one Txn. The lease is not
kept alive: it outlives this command and expires after --ttl unless renewed
('leasegate renew'). Prints the grant; keep it (-o json) for commit, renew and
release. A task held by someone else is refused with busy and the holder.
With --gateway the owner is your certificate's identity (--owner is
refused) and the lease is the gateway's session, renewed only by 'renew'.`,
			"leasegate -o json claim --tenant acme --task invoices --owner worker-1 --ttl 30s > grant.json"),
		Flags: []cli.Flag{
			tenantFlag("tenant of the task"), taskFlag("task to claim"), ownerFlag(), ttlFlag(10 * time.Second),
		},
		Action: claim,
	}
}

func claim(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if viaGateway(c) {
		return claimViaGateway(c)
	}
	l, err := labels(c, "tenant", "task", "owner")
	if err != nil {
		return err
	}
	tenant, task, owner := l[0], l[1], l[2]
	ttl, err := ttlOf(c)
	if err != nil {
		return err
	}
	return withCoordinator(c, acts, func(ctx context.Context, co *coordinator.Coordinator) error {
		s, err := co.NewSession(ctx, owner, ttl, coordinator.WithoutKeepAlive())
		if err != nil {
			return err
		}
		g, err := s.Claim(ctx, tenant, task)
		if err != nil {
			// The lease is of no use without the task (and if a claim whose
			// answer was lost did apply, revoking undoes it): give it back.
			// If etcd cannot be reached, the lease expires after its TTL.
			rctx, rcancel := cleanupContext(c)
			defer rcancel()
			_ = s.Close(rctx)
			return err
		}
		// No Close: the lease must outlive this process.
		return globalsOf(c).out.result(grantOutput{Disposition: coordinator.Granted, Grant: g}, grantTable(coordinator.Granted, g))
	})
}

func renewCommand() *cli.Command {
	return &cli.Command{
		Name:  "renew",
		Usage: "keep a grant's lease alive once, if the grant is still current",
		Description: example(`Renews the grant's lease for one more TTL, after checking that the grant is
still the current owner of its task. An expired lease cannot be revived:
claim again for a new epoch. With --gateway the gateway renews it in answer
to this call only, for a grant whose owner is your certificate's identity.`,
			"leasegate renew --grant grant.json",
			"leasegate --gateway https://gw:7443 --cacert ca.pem --cert w.pem --key w-key.pem renew --grant grant.json"),
		Flags:  []cli.Flag{grantFlag()},
		Action: renew,
	}
}

func renew(c *cli.Context) error {
	return withGrant(c, coordinator.Renewed, (*coordinator.Coordinator).Renew)
}

func releaseCommand() *cli.Command {
	return &cli.Command{
		Name:  "release",
		Usage: "delete a grant's owner key, if the grant is still current",
		Description: example(`Releases the task: deletes its owner key, if and only if the grant is still
current (a stale release never deletes a newer owner's key). The fence stays,
so the released epoch is refused from then on. The lease is not revoked.`,
			"leasegate release --grant grant.json",
			"leasegate -o json claim --tenant acme --task invoices --owner w1 | leasegate release --grant -"),
		Flags:  []cli.Flag{grantFlag()},
		Action: release,
	}
}

func release(c *cli.Context) error {
	return withGrant(c, coordinator.Released, (*coordinator.Coordinator).Release)
}

// withGrant runs one action on the grant of --grant and prints it with done.
func withGrant(c *cli.Context, done coordinator.Disposition, act func(*coordinator.Coordinator, context.Context, coordinator.Grant) error) error {
	if err := noArgs(c); err != nil {
		return err
	}
	g, err := grantOf(c)
	if err != nil {
		return err
	}
	if viaGateway(c) {
		return withGateway(c, func(ctx context.Context, gw *client.Client) error {
			act := gw.Release
			if done == coordinator.Renewed {
				act = gw.Renew
			}
			if err := act(ctx, g); err != nil {
				return err
			}
			return globalsOf(c).out.result(grantOutput{Disposition: done, Grant: g}, grantTable(done, g))
		})
	}
	// The grant's keyspace must exist: never create one to refuse it in.
	return withCoordinator(c, reads, func(ctx context.Context, co *coordinator.Coordinator) error {
		if err := act(co, ctx, g); err != nil {
			return err
		}
		return globalsOf(c).out.result(grantOutput{Disposition: done, Grant: g}, grantTable(done, g))
	})
}
