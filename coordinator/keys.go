package coordinator

import "github.com/leasegate/leasegate/internal/store"

// The key layout (docs/design.md, "Keys and labels") is
// internal/store/keys.go's: every key leasegate writes, the ledger's and
// retention's too. Keyspace shows the keys a user of coordinator reads or
// puts in a Txn of its own.

// DefaultPrefix is the key prefix when WithPrefix is not given.
const DefaultPrefix = store.DefaultPrefix

// MaxLabelLen is the longest tenant, task, owner or operation label.
const MaxLabelLen = store.MaxLabelLen

// Keyspace builds the keys of one prefix.
type Keyspace struct{ k store.Keys }

// Prefix is the keyspace's prefix.
func (k Keyspace) Prefix() string { return k.k.Prefix() }

// Realm is the key holding the realm UUID.
func (k Keyspace) Realm() string { return k.k.Realm() }

// Fence is the task's fence key: its value names the owner and lease the
// published epoch belongs to, its ModRevision is that epoch.
func (k Keyspace) Fence(tenant, task string) string { return k.k.Fence(tenant, task) }

// Owner is the task's owner key: the owner label, on the owner's lease.
func (k Keyspace) Owner(tenant, task string) string { return k.k.Owner(tenant, task) }

// State is the task's protected business state.
func (k Keyspace) State(tenant, task string) string { return k.k.State(tenant, task) }

// Op is the record of one committed operation of a task.
func (k Keyspace) Op(tenant, task, operation string) string { return k.k.Op(tenant, task, operation) }

// ParseOp splits an operation record's key back into tenant, task and
// operation.
func (k Keyspace) ParseOp(key string) (tenant, task, operation string, ok bool) {
	return k.k.ParseOp(key)
}

// TaskPrefix is the prefix under which kind's keys of tenant live, or of
// every tenant when tenant is "".
func (k Keyspace) TaskPrefix(kind Kind, tenant string) string { return k.k.TaskPrefix(kind, tenant) }

// ParseTask splits a fence, owner or state key of this keyspace back into
// its kind, tenant and task.
func (k Keyspace) ParseTask(key string) (kind Kind, tenant, task string, ok bool) {
	return k.k.ParseTask(key)
}

// Kind names a family of per-task keys: the path segment after the prefix
// (<prefix>/<kind>/<tenant>/<task>). One constant per kind is its one
// spelling.
type Kind = store.Kind

// The kinds of per-task keys a user reads.
const (
	KindFence = store.KindFence // Fence: the task's fence key
	KindOwner = store.KindOwner // Owner: the task's owner key
	KindState = store.KindState // State: the task's protected state
	KindOps   = store.KindOps   // Op: a committed operation's record
)

// CheckLabel reports why s is not a label: 1–80 characters, each printable
// ASCII 33–126 (no space, no control, no non-ASCII).
func CheckLabel(what, s string) error { return store.CheckLabel(what, s) }

// CheckTask reports why tenant and task cannot name a task.
func CheckTask(tenant, task string) error { return store.CheckTask(tenant, task) }
