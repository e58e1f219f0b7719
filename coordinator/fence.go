package coordinator

// What a fenced Txn compares, and how a failed one is classified, is
// internal/store/guard.go's: Guard(g) holds exactly while g is the current,
// live grant of its task (same realm, fence not moved since g's claim, the
// owner key of that very claim, same owner, same lease), and a failed guard
// is refused, in the order realm, fence, owner, as
// authority_generation_mismatch, stale_owner or expired_owner. Current asks
// that question on its own; Renew, Release, fencedtxn.Commit and the
// ledger's transitions ask it in the Txn that also performs their write.

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/internal/store"
)

// Guard is the set of compares that hold exactly while g is the current,
// live grant of its task: same realm, fence not moved since g's claim, the
// owner key of that very claim, same owner, same lease (expiry or revocation
// deletes the key). Put them in the If of a Txn of your own to fence your
// own writes; when that Txn fails, Current says whether the grant is refused
// (a refusal is for good: a fence never moves back, a rotated realm never
// returns, a deleted owner key is never rewritten at the same revision) or
// still current, so that your own compares failed.
func (c *Coordinator) Guard(g Grant) []clientv3.Cmp { return c.s.Guard(g) }

// Current answers "is g still the current grant of its task?" with one
// linearizable, read-only Txn of Guard(g), classified by the store's CheckGuard. It
// returns nil while the realm, the fence, the owner key of g's very claim
// and its lease all still match g. Otherwise it returns the *Error of the
// refusal, with the holder the authority showed:
//
//   - authority_generation_mismatch: the realm rotated, or no realm is there;
//   - stale_owner: a newer grant moved the fence, or the owner key is another
//     claim's;
//   - expired_owner: the fence is still g's but its owner key is gone (the
//     lease expired or was revoked, or g was released);
//   - invalid_input: g is not a grant at all; nothing was sent.
//
// When etcd cannot answer it is authority_unavailable: a hold, since the
// question was not answered (a read is never outcome_unknown). Current
// writes nothing and renews nothing; an answer is true as of the read, so
// a write that depends on it must carry Guard(g) in its own Txn.
func (c *Coordinator) Current(ctx context.Context, g Grant) error {
	return c.current(ctx, "current", g)
}

// current is Current with op naming the request in its errors.
func (c *Coordinator) current(ctx context.Context, op string, g Grant) error {
	if err := g.Validate(); err != nil {
		return store.NewError(InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	resp, err := c.s.Txn(ctx, store.TxnRequest{Op: op, Tenant: g.Tenant, Task: g.Task, ReadOnly: true,
		If: c.Guard(g), Else: c.s.GuardReads(g)})
	if err != nil {
		return err
	}
	if resp.Succeeded {
		return nil
	}
	return c.s.DescribeHolder(ctx, c.s.CheckGuard(op, g, resp.Responses))
}
