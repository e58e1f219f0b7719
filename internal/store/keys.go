package store

import (
	"fmt"
	"strings"
)

// The key layout (docs/design.md, "Keys and labels") lives in this file and
// nowhere else.
//
//	<p>/realm                                realm UUID
//	<p>/origin                               where the realm was minted: etcd cluster ID, raft index
//	<p>/fence/<tenant>/<task>                {owner, lease}; its ModRevision is the published floor
//	<p>/owner/<tenant>/<task>                owner label, on the owner's lease
//	<p>/state/<tenant>/<task>                {version, value, operation, epoch}
//	<p>/ops/<tenant>/<task>/<operation>      {payload_digest, receipt, epoch, owner}
//	<p>/effects/<tenant>/<task>/<operation>  effect record (ledger)
//	<p>/journal/<tenant>/<task>/<operation>/<seq>  one ledger transition
//	                                         (ordered by seq per operation, by
//	                                         CreateRevision per task)
//	<p>/retention/clock                      rewritten by each retention run to learn a revision
//	<p>/retention/marks/<revision>           a retention clock mark: the time at that revision
//	<p>/limits/<what>/<identity>/<unit>      one unit a gateway caller holds against a limit of
//	                                         its identity (what: sessions, grants, watches), on
//	                                         the lease that ends the unit
//
// Labels may contain '/' and '%'; in keys they are percent-escaped, so the
// encoding is injective: tenant "a/b" task "c" and tenant "a" task "b/c" are
// different keys.

// DefaultPrefix is the key prefix when WithPrefix is not given.
const DefaultPrefix = "/leasegate"

// MaxLabelLen is the longest tenant, task, owner or operation label.
const MaxLabelLen = 80

// Keys builds the keys of one prefix: every key leasegate writes, the
// ledger's and retention's too (coordinator.Keyspace shows the ones its
// users read).
type Keys struct{ prefix string }

// NewKeys is the layout of prefix (checked by CheckPrefix).
func NewKeys(prefix string) Keys { return Keys{prefix} }

// Prefix is the keyspace's prefix.
func (k Keys) Prefix() string { return k.prefix }

// Realm is the key holding the realm UUID.
func (k Keys) Realm() string { return k.prefix + RealmSuffix }

// RealmSuffix follows a keyspace's prefix in its realm key.
const RealmSuffix = "/realm"

// Kind names a family of per-task keys: the path segment after the prefix
// (<prefix>/<kind>/<tenant>/<task>). One constant per kind is its one
// spelling.
type Kind string

// The kinds of per-task keys.
const (
	KindFence   Kind = "fence"   // Fence: the task's fence key
	KindOwner   Kind = "owner"   // Owner: the task's owner key
	KindState   Kind = "state"   // State: the task's protected state
	KindOps     Kind = "ops"     // Op: a committed operation's record
	KindEffects Kind = "effects" // a ledger record of an external effect
	KindJournal Kind = "journal" // a ledger transition
)

// NestedSubtree is the one path inside a keyspace under which another
// keyspace may live: <prefix>/drill/, where `leasegate drill --endpoints`
// runs (so the one etcd role on the prefix covers the drill). It is no
// kind of this keyspace, so none of its scans, reads or deletions (all
// under <prefix>/<kind>/ or a named key) reach a keyspace nested there.
const NestedSubtree = "/drill/"

// Origin is the key recording where the current realm was minted (the etcd
// cluster and how far its raft log had come), to detect a restore.
func (k Keys) Origin() string { return k.prefix + "/origin" }

// Fence is the task's fence key.
func (k Keys) Fence(tenant, task string) string { return k.task(KindFence, tenant, task) }

// Owner is the task's owner key.
func (k Keys) Owner(tenant, task string) string { return k.task(KindOwner, tenant, task) }

// State is the task's protected business state.
func (k Keys) State(tenant, task string) string { return k.task(KindState, tenant, task) }

// Op is the record of one committed operation of a task.
func (k Keys) Op(tenant, task, operation string) string {
	return k.task(KindOps, tenant, task) + "/" + escape(operation)
}

// Effect is the ledger record of one external effect of a task.
func (k Keys) Effect(tenant, task, operation string) string {
	return k.task(KindEffects, tenant, task) + "/" + escape(operation)
}

// EffectPrefix is the prefix of every ledger record of a task.
func (k Keys) EffectPrefix(tenant, task string) string {
	return k.task(KindEffects, tenant, task) + "/"
}

// JournalEntry is the journal entry of an operation's seq-th ledger
// transition. A fenced Txn cannot know its own revision before it applies,
// so the ledger keys entries by operation and sequence number; the entry's
// CreateRevision is the revision of the transition.
func (k Keys) JournalEntry(tenant, task, operation string, seq int64) string {
	return fmt.Sprintf("%s%020d", k.JournalOperationPrefix(tenant, task, operation), seq)
}

// JournalOperationPrefix is the prefix of every journal entry of one
// operation.
func (k Keys) JournalOperationPrefix(tenant, task, operation string) string {
	return k.JournalPrefix(tenant, task) + escape(operation) + "/"
}

// JournalPrefix is the prefix of every journal entry of a task.
func (k Keys) JournalPrefix(tenant, task string) string {
	return k.task(KindJournal, tenant, task) + "/"
}

// RetentionMark is the retention clock mark written at revision: its value
// is the time (RFC 3339) read just after the mark was applied.
func (k Keys) RetentionMark(revision int64) string {
	return fmt.Sprintf("%s%020d", k.RetentionMarks(), revision)
}

// RetentionClock is the key a retention run rewrites to learn the current
// revision before it reads its clock.
func (k Keys) RetentionClock() string { return k.prefix + "/retention/clock" }

// RetentionMarks is the prefix of every retention clock mark.
func (k Keys) RetentionMarks() string { return k.prefix + "/retention/marks/" }

// Limit is the key of one unit identity holds against the gateway's limit
// of what ("sessions", "grants", "watches"): one segment, whatever unit is.
// The gateway puts it on the lease that ends the unit, so etcd frees the
// unit when that lease ends.
func (k Keys) Limit(what, identity, unit string) string {
	return k.LimitPrefix(what, identity) + escape(unit)
}

// LimitPrefix is the prefix of every unit identity holds against the
// gateway's limit of what.
func (k Keys) LimitPrefix(what, identity string) string {
	return k.LimitsRoot() + escape(what) + "/" + escape(identity) + "/"
}

// LimitsRoot is the prefix of every unit held against a gateway's limits.
func (k Keys) LimitsRoot() string { return k.prefix + "/limits/" }

// ParseOp splits an operation record's key back into tenant, task and
// operation.
func (k Keys) ParseOp(key string) (tenant, task, operation string, ok bool) {
	return k.parseOperation(KindOps, key)
}

// ParseEffect splits an effect record's key back into tenant, task and
// operation.
func (k Keys) ParseEffect(key string) (tenant, task, operation string, ok bool) {
	return k.parseOperation(KindEffects, key)
}

func (k Keys) parseOperation(kind Kind, key string) (tenant, task, operation string, ok bool) {
	rest, found := strings.CutPrefix(key, k.prefix+"/"+string(kind)+"/")
	if !found {
		return "", "", "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return "", "", "", false
	}
	var errs [3]error
	tenant, errs[0] = unescape(parts[0])
	task, errs[1] = unescape(parts[1])
	operation, errs[2] = unescape(parts[2])
	if errs[0] != nil || errs[1] != nil || errs[2] != nil {
		return "", "", "", false
	}
	return tenant, task, operation, true
}

// TaskPrefix is the prefix under which kind's keys of tenant live, or of
// every tenant when tenant is "".
func (k Keys) TaskPrefix(kind Kind, tenant string) string {
	if tenant == "" {
		return k.prefix + "/" + string(kind) + "/"
	}
	return k.prefix + "/" + string(kind) + "/" + escape(tenant) + "/"
}

// ParseTask splits a fence, owner or state key of this keyspace back into
// its kind, tenant and task.
func (k Keys) ParseTask(key string) (kind Kind, tenant, task string, ok bool) {
	rest, found := strings.CutPrefix(key, k.prefix+"/")
	if !found {
		return "", "", "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return "", "", "", false
	}
	tenant, err1 := unescape(parts[1])
	task, err2 := unescape(parts[2])
	if err1 != nil || err2 != nil {
		return "", "", "", false
	}
	return Kind(parts[0]), tenant, task, true
}

func (k Keys) task(kind Kind, tenant, task string) string {
	return k.prefix + "/" + string(kind) + "/" + escape(tenant) + "/" + escape(task)
}

// escape percent-escapes '%' and '/', the only characters of a label that
// could make two label tuples share a key.
func escape(label string) string {
	if !strings.ContainsAny(label, "%/") {
		return label
	}
	var b strings.Builder
	b.Grow(len(label) + 2*(strings.Count(label, "%")+strings.Count(label, "/")))
	for i := 0; i < len(label); i++ {
		switch c := label[i]; c {
		case '%':
			b.WriteString("%25")
		case '/':
			b.WriteString("%2F")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// unescape inverts escape. It accepts only the two escapes escape writes
// ("%25" and "%2F"), so every key that decodes is the encoding of what it
// decodes to: "%41" or "%2f" would otherwise name the same label as "A" or
// "/" under a second key (found by FuzzParseKey).
func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(s[i:], "%2F"):
			b.WriteByte('/')
		default:
			return "", fmt.Errorf("coordinator: bad escape in %q", s)
		}
		i += 2
	}
	return b.String(), nil
}

// CheckLabel reports why s is not a label: 1–80 characters, each printable
// ASCII 33–126 (no space, no control, no non-ASCII).
func CheckLabel(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if len(s) > MaxLabelLen {
		return fmt.Errorf("%s is %d bytes long; at most %d", what, len(s), MaxLabelLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 33 || c > 126 {
			return fmt.Errorf("%s has byte 0x%02x at offset %d; labels are printable ASCII 33-126", what, c, i)
		}
	}
	return nil
}

// CheckTask reports why tenant and task cannot name a task.
func CheckTask(tenant, task string) error {
	if err := CheckLabel("tenant", tenant); err != nil {
		return err
	}
	return CheckLabel("task", task)
}

// CheckPrefix reports why p cannot be a keyspace's prefix.
func CheckPrefix(p string) error {
	if p == "" || p[0] != '/' {
		return fmt.Errorf("prefix %q must start with '/'", p)
	}
	if strings.HasSuffix(p, "/") {
		return fmt.Errorf("prefix %q must not end with '/'", p)
	}
	if len(p) > 256 {
		return fmt.Errorf("prefix is %d bytes long; at most 256", len(p))
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 33 || c > 126 {
			return fmt.Errorf("prefix has byte 0x%02x at offset %d; printable ASCII only", c, i)
		}
	}
	return nil
}

// The values stored under the keys above are records.go's (FenceRecord,
// StateRecord, OpRecord).
