package coordinator

import "context"

// SetAcquireHook has Acquire call f(step) inside the windows of its wait on
// key ("busy": after the busy answer, before the watch; "watching": after
// the watch is registered, before the key is read again), until the
// returned func removes it.
func SetAcquireHook(key string, f func(step string)) (remove func()) {
	acquireHooks.Store(key, f)
	return func() { acquireHooks.Delete(key) }
}

// ClusterStatus is the reading of the cluster an origin is made of (op
// "realm"): of the members that answer, the one with the largest
// revision − raft index when largest (recording an origin), the smallest
// otherwise (checking one).
func (c *Coordinator) ClusterStatus(ctx context.Context, largest bool) (Origin, error) {
	return c.clusterStatus(ctx, "realm", largest)
}

// RecordOrigin records the origin of realm as New does once it has created
// realm at revision rev: only while the realm key is still that write.
func (c *Coordinator) RecordOrigin(ctx context.Context, realm string, rev int64) {
	c.recordOrigin(ctx, realm, rev)
}

// Origin is the key of the realm's origin record.
func (k Keyspace) Origin() string { return k.k.Origin() }
