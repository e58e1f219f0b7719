package fencedtxn

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
)

// Guard is the fence compares for a caller's own Txn: it applies only while
// g is the current, live grant of its task. Put GuardReads first in the
// Txn's Else and pass a failed response to Refusal to learn why.
//
//	resp, err := cli.Txn(ctx).
//		If(append(fencedtxn.Guard(c, g), myCmps...)...).
//		Then(myOps...).
//		Else(fencedtxn.GuardReads(c, g)...).
//		Commit()
//	if err == nil && !resp.Succeeded {
//		err = fencedtxn.Refusal(c, g, resp) // nil: the grant is current, my own compares failed
//	}
func Guard(c *coordinator.Coordinator, g coordinator.Grant) []clientv3.Cmp {
	return c.Guard(g)
}

// GuardReads are the reads Refusal needs, first in a guarded Txn's Else.
func GuardReads(c *coordinator.Coordinator, g coordinator.Grant) []clientv3.Op {
	return c.GuardReads(g)
}

// Refusal classifies a failed Txn guarded by Guard whose Else began with
// GuardReads: authority_generation_mismatch, stale_owner or expired_owner,
// or nil if g is still current (so the caller's own compares failed).
func Refusal(c *coordinator.Coordinator, g coordinator.Grant, resp *clientv3.TxnResponse) error {
	if resp == nil || resp.Succeeded {
		return nil
	}
	return c.CheckGuard("guard", g, resp.Responses)
}
