package main

// The independent list: realistic bugs planted in every safety
// file by someone who had read only the non-test code, before reading any
// test — off-by-ones in deadlines and bounds, compares dropped or
// weakened, operators flipped, classification branches swapped or
// reordered, error checks missed, an id re-minted on retry, a revision read
// from the wrong field, a cache keyed too coarsely. Their names start with
// indep/; `go run ./tools/mutate -only '^indep/'` runs them alone. Each
// runs the tests of its own package and of the safety packages built on
// it, whole (the list was written without knowing the tests' names);
// where a test was later written or found to kill one, killedBy names it
// and it runs first.
//
// The score of this list, before and after the tests its survivors led
// to, is in docs/reliability.md ("The independent mutation list").

import "strings"

func init() { mutations = append(append(mutations, indepMutations...), indepConsole...) }

const (
	sessionGo        = "coordinator/session.go"
	attachGo         = "coordinator/attach.go"
	keepAliveGo      = "coordinator/keepalive.go"
	limitsGo         = "internal/store/txn.go"
	realmGo          = "coordinator/realm.go"
	keysGo           = "internal/store/keys.go"
	metricsGo        = "coordinator/metrics.go"
	dispGo           = "internal/store/disposition.go"
	coordDispGo      = "coordinator/disposition.go"
	leasesGo         = "coordinator/leases.go"
	restoreGo        = "coordinator/restore.go"
	ownershipGo      = "coordinator/ownership.go"
	watchGo          = "coordinator/watch.go"
	leaseIDGo        = "internal/store/leaseid.go"
	storeLeaseGo     = "internal/store/lease.go"
	storeOwnershipGo = "internal/store/ownership.go"
	encodeGo         = "fencedtxn/encode.go"
	stateGo          = "fencedtxn/state.go"
	recordGo         = "ledger/record.go"
	intentGo         = "ledger/intent.go"
	decodeGo         = "ledger/decode.go"
	resolveGo        = "ledger/resolve.go"
	readsGo          = "ledger/reads.go"
)

// ind is one single-edit independent mutation, run against its package and
// the safety packages that depend on it.
func ind(name, file, what, orig, repl string) Mutation {
	return Mutation{Name: "indep/" + name, File: file, What: what, Edits: []Edit{{orig, repl}}, Tests: indepTests(file)}
}

// indN is an independent mutation of several edits of one file.
func indN(name, file, what string, edits ...Edit) Mutation {
	return Mutation{Name: "indep/" + name, File: file, What: what, Edits: edits, Tests: indepTests(file)}
}

func indepTests(file string) []Run {
	switch {
	case strings.HasPrefix(file, "coordinator/"):
		return []Run{coordPkg, txnPkg, ledgerPkg, gcPkg}
	case strings.HasPrefix(file, "fencedtxn/"):
		return []Run{txnPkg, gcPkg}
	case strings.HasPrefix(file, "ledger/"):
		return []Run{ledgerPkg, gcPkg}
	case strings.HasPrefix(file, "internal/store/"):
		return []Run{storePkg, coordPkg, txnPkg, ledgerPkg, gcPkg}
	case strings.HasPrefix(file, "console/"):
		return []Run{{Pkg: "./console"}}
	case strings.HasPrefix(file, "internal/digest/"):
		return []Run{{Pkg: "./internal/digest"}, txnPkg, ledgerPkg}
	}
	return []Run{gcPkg}
}

var indepMutations = []Mutation{
	// ---- coordinator/claim.go
	ind("claim/retried-epoch-is-now", claimGo, "a claim retried after a lost answer reports the retry's revision as its epoch, not its claim's",
		`Epoch: held.ModRevision, Lease: int64(s.lease)}`, `Epoch: resp.Header.Revision, Lease: int64(s.lease)}`),
	ind("claim/retried-same-lease-any-owner", claimGo, "an owner key on this session's lease is taken as this session's claim whatever its owner label",
		`case held.Lease == int64(s.lease) && string(held.Value) == s.owner:`, `case held.Lease == int64(s.lease):`).
		killedBy("./coordinator", "TestClaimDoesNotTakeAnotherLabelsKeyOnItsLease"),
	ind("claim/no-realm-no-keyspace", claimGo, "a claim on a wiped keyspace is no_keyspace instead of authority_generation_mismatch",
		`return Grant{}, 0, store.NewError(GenerationMismatch, "claim", tenant, task, "the authority has no realm (keyspace wiped or wrong prefix)", nil)`,
		`return Grant{}, 0, store.NewError(NoKeyspace, "claim", tenant, task, "the authority has no realm (keyspace wiped or wrong prefix)", nil)`),
	ind("acquire/watch-from-now", claimGo, "Acquire trusts its watch from now: a release between the busy claim and the watch's start is missed",
		`case len(got.Kvs) == 0 || got.Kvs[0].ModRevision != held:`, `case got == nil:`),
	ind("acquire/session-end-ignored", claimGo, "Acquire keeps waiting after its session ended",
		`case <-s.Done():`, `case <-make(chan struct{}):`).
		killedBy("./coordinator", "TestAcquireReturnsWhenItsSessionEnds"),
	ind("acquire/reclaim-in-window-missed", claimGo, "Acquire's re-read after its watch starts only counts a deletion: a key deleted and claimed again in the window keeps it waiting",
		`case len(got.Kvs) == 0 || got.Kvs[0].ModRevision != held:`, `case len(got.Kvs) == 0:`),
	// An owner key written at the realm's own revision would need one Txn
	// writing the realm and an owner key: New and RotateRealm write the
	// realm (and its origin) alone, a claim writes an owner key and a fence
	// alone. So ModRevision(owner) == Rrev never holds, and < Rrev+1 (etcd's
	// compares have no <=) is < Rrev.
	ind("claim/owner-cmp-inclusive", claimGo, "the claim takes an owner key written at the realm's revision as one of an older realm",
		`clientv3.Compare(clientv3.ModRevision(owner), "<", realmRev),`, `clientv3.Compare(clientv3.ModRevision(owner), "<", realmRev+1),`).
		equivalent("no Txn of leasegate writes the realm key and an owner key together, so no owner key is ever at the realm's revision"),
	// A watch created at a header revision equal to busyRev covers every
	// revision after busyRev (waitDeleted's proof, case H <= busyRev); the
	// mutant reads the key again there, which finds it still at held (keep
	// waiting) or gone or rewritten (claim again): what the watch would
	// have said, one Get sooner.
	ind("acquire/created-at-busy-rereads", claimGo, "Acquire reads the key again when its watch was created at the busy claim's own revision",
		`if !resp.Created || resp.Header.Revision <= busyRev {`, `if !resp.Created || resp.Header.Revision < busyRev {`).
		equivalent("at H == busyRev the watch already covers every revision after busyRev; the extra Get answers as the watch would"),
	ind("claim/stale-key-by-create-revision", claimGo, "the claim compares the owner key's create revision with the realm's: a key of the old realm overwritten by a claim stays claimable (two holders)",
		`clientv3.Compare(clientv3.ModRevision(owner), "<", realmRev),`, `clientv3.Compare(clientv3.CreateRevision(owner), "<", realmRev),`),

	// ---- internal/store/guard.go (Guard, CheckGuard) and coordinator/fence.go (Current)
	ind("guard/drop-realm", storeGuardGo, "Guard without Value(realm) == g.Realm",
		`clientv3.Compare(clientv3.Value(k.Realm()), "=", g.Realm),`, ``),
	ind("guard/drop-fence", storeGuardGo, "Guard without ModRevision(fence) == g.Epoch",
		`clientv3.Compare(clientv3.ModRevision(k.Fence(g.Tenant, g.Task)), "=", g.Epoch),`, ``),
	ind("guard/drop-owner-modrev", storeGuardGo, "Guard without ModRevision(owner) == g.Epoch",
		`clientv3.Compare(clientv3.ModRevision(owner), "=", g.Epoch),`, ``),
	ind("guard/drop-owner-value", storeGuardGo, "Guard without Value(owner) == g.Owner",
		`clientv3.Compare(clientv3.Value(owner), "=", g.Owner),`, ``),
	ind("guard/drop-lease", storeGuardGo, "Guard without LeaseValue(owner) == g.Lease",
		`clientv3.Compare(clientv3.LeaseValue(owner), "=", clientv3.LeaseID(g.Lease)),`, ``),
	ind("checkguard/no-fence-expired", storeGuardGo, "a task without a fence is classified expired_owner, not stale_owner",
		`return refuse(StaleOwner, "the task has no fence: no grant`, `return refuse(ExpiredOwner, "the task has no fence: no grant`),
	ind("checkguard/owner-gone-stale", storeGuardGo, "a grant whose owner key is gone is classified stale_owner, not expired_owner",
		`return refuse(ExpiredOwner, "the owner key of epoch`, `return refuse(StaleOwner, "the owner key of epoch`),
	ind("checkguard/owner-before-fence", storeGuardGo, "CheckGuard looks at the owner key before the fence: a superseded grant whose successor left reads as expired",
		"\tswitch {\n\tcase realm == nil:",
		"\tif owner == nil && realm != nil && string(realm.Value) == g.Realm {\n\t\treturn refuse(ExpiredOwner, \"the owner key is gone\")\n\t}\n\tswitch {\n\tcase realm == nil:"),
	ind("checkguard/realm-mismatch-stale", storeGuardGo, "a grant of another realm is classified stale_owner, not authority_generation_mismatch",
		`return refuse(GenerationMismatch, "grant realm %s, authority realm %s"`, `return refuse(StaleOwner, "grant realm %s, authority realm %s"`),
	ind("checkguard/fence-owner-unchecked", storeGuardGo, "CheckGuard does not compare the fence record's owner with the grant's",
		`err != nil || fr.Owner != g.Owner || fr.Lease != g.Lease {`, `err != nil || fr.Lease != g.Lease {`).
		killedBy("./internal/store", "TestCheckGuardNamesAnImpostorOfAReleasedEpochStale"),
	ind("current/not-validated", fenceGo, "Current sends a grant that is not a grant at all instead of refusing it as invalid_input",
		"if err := g.Validate(); err != nil {\n\t\treturn store.NewError(InvalidInput, op,", "if err := g.Validate(); err != nil && false {\n\t\treturn store.NewError(InvalidInput, op,"),
	ind("current/not-read-only", fenceGo, "the currency check is sent as a write: a lost answer reads as outcome_unknown",
		"ReadOnly: true,\n\t\tIf: c.Guard(g), Else: c.s.GuardReads(g)})", "ReadOnly: false,\n\t\tIf: c.Guard(g), Else: c.s.GuardReads(g)})"),
	ind("checkguard/fence-older-unnamed", storeGuardGo, "a fence older than the grant (a restore before it, another cluster) is not told apart: it reads as the owner key's mismatch",
		"\tcase fence.ModRevision < g.Epoch:\n\t\treturn refuse(StaleOwner, \"the fence is at epoch %d, older than the grant's epoch %d: the authority never published this grant \"+\n\t\t\t\"(it was forged, or the keyspace was restored from a snapshot taken before it was granted, or is another cluster's)\", fence.ModRevision, g.Epoch)\n", ""),
	ind("checkguard/fence-lease-unchecked", storeGuardGo, "CheckGuard does not compare the fence record's lease with the grant's: an impostor of a released grant's epoch reads as expired",
		`err != nil || fr.Owner != g.Owner || fr.Lease != g.Lease {`, `err != nil || fr.Owner != g.Owner {`).
		killedBy("./internal/store", "TestCheckGuardNamesAnImpostorOfAReleasedEpochStale"),
	ind("checkguard/fence-newer-inclusive", storeGuardGo, "a fence at the grant's own epoch reads as a newer grant: a released or expired grant is stale_owner, not expired_owner",
		`case fence.ModRevision > g.Epoch:`, `case fence.ModRevision >= g.Epoch:`).
		killedBy("./internal/store", "TestCheckGuardNamesAnImpostorOfAReleasedEpochStale"),
	ind("checkguard/fence-older-inclusive", storeGuardGo, "a fence at the grant's own epoch reads as one older than the grant",
		`case fence.ModRevision < g.Epoch:`, `case fence.ModRevision <= g.Epoch:`).
		killedBy("./internal/store", "TestCheckGuardNamesAnImpostorOfAReleasedEpochStale"),
	// The owner key's lease cannot differ from the grant's once the fence
	// record's has been found equal: the claim Txn writes the owner key and
	// the fence record together, at one revision, with one lease; an owner
	// key at g.Epoch is that Txn's, so its lease is the fence record's, which
	// CheckGuard has just compared with g.Lease. Only a keyspace written
	// outside leasegate (owner and fence put in one Txn with two leases)
	// tells them apart.
	ind("checkguard/owner-lease-unchecked", storeGuardGo, "CheckGuard does not compare the owner key's lease with the grant's",
		`|| string(owner.Value) != g.Owner || owner.Lease != g.Lease {`, `|| string(owner.Value) != g.Owner {`).
		equivalent("the owner key at g.Epoch and the fence record were written by one claim Txn with one lease, and the fence record's lease was just compared with g.Lease"),
	ind("current/succeeded-inverted", fenceGo, "Current reads a guard that held as a refusal and one that failed as current",
		"\tif resp.Succeeded {\n\t\treturn nil\n\t}\n\treturn c.s.DescribeHolder", "\tif !resp.Succeeded {\n\t\treturn nil\n\t}\n\treturn c.s.DescribeHolder").
		killedBy("./coordinator", "TestCurrentAnswersEachRefusal"),

	// ---- internal/store/grant.go
	ind("grant/epoch-zero-valid", grantGo, "a grant of epoch 0 passes Validate",
		`if g.Epoch <= 0 {`, `if g.Epoch < 0 {`),
	ind("grant/lease-zero-valid", grantGo, "a grant of lease 0 passes Validate",
		`if g.Lease <= 0 {`, `if g.Lease < 0 {`).
		killedBy("./coordinator", "TestZeroLeaseAndFullMarginAreInvalidInput"),
	ind("grant/no-realm-valid", grantGo, "a grant without a realm passes Validate",
		`if g.Realm == "" {`, `if false {`),
	ind("grant/unknown-json-fields", grantGo, "a grant's JSON with a misspelt field reads as a zero value",
		`dec.DisallowUnknownFields()`, ``),
	ind("grant/owner-label-unchecked", grantGo, "a grant whose owner is not a valid label passes Validate (and is sent to etcd)",
		"\tif err := CheckLabel(\"owner\", g.Owner); err != nil {\n\t\treturn err\n\t}\n", ""),
	ind("renew/not-checked", renewGo, "Renew keeps a stale grant's lease alive without checking the grant",
		`if err := c.current(ctx, "renew", g); err != nil {`, `if err := c.current(ctx, "renew", g); err != nil && false {`),
	ind("renew/not-mutating", renewGo, "a renewal whose answer was lost is a hold, not outcome_unknown",
		`r := store.Request{Op: "renew", Tenant: g.Tenant, Task: g.Task, Mutating: true}`, `r := store.Request{Op: "renew", Tenant: g.Tenant, Task: g.Task, Mutating: false}`).
		killedBy("./coordinator", "TestRenewWhoseAnswerWasLostIsOutcomeUnknown"),
	ind("release/realm-only-guard", releaseGo, "Release deletes the owner key under the realm compare only",
		`If: c.Guard(g), Then: []clientv3.Op{clientv3.OpDelete(c.keys.Owner(g.Tenant, g.Task))}`,
		`If: c.Guard(g)[:1], Then: []clientv3.Op{clientv3.OpDelete(c.keys.Owner(g.Tenant, g.Task))}`),
	ind("release/refusal-swallowed", releaseGo, "a refused Release reports success",
		`return c.s.DescribeHolder(ctx, c.s.CheckGuard("release", g, resp.Responses))`, `_ = c.s.DescribeHolder(ctx, c.s.CheckGuard("release", g, resp.Responses))`),
	// (planted from the source only, one at a time: the first two were
	// killed by the tests already there; the third survived until
	// TestReleaseLeavesSiblingTasksHeld)
	ind("release/unvalidated", releaseGo, "Release sends a grant Validate refuses: bad input is a refusal by etcd, not invalid_input before any I/O",
		`if err := g.Validate(); err != nil {`, `if err := g.Validate(); err != nil && false {`).
		killedBy("./coordinator", "TestBadInputWritesNothing"),
	ind("release/holder-undescribed", releaseGo, "a refused Release names the holder without its state and TTL left",
		`return c.s.DescribeHolder(ctx, c.s.CheckGuard("release", g, resp.Responses))`, `return c.s.CheckGuard("release", g, resp.Responses)`).
		killedBy("./coordinator", "TestCurrentAnswersEachRefusal"),
	ind("release/delete-prefix", releaseGo, "Release deletes the owner key as a prefix: releasing job deletes the owner keys of job-1 and job%2Fx",
		`clientv3.OpDelete(c.keys.Owner(g.Tenant, g.Task))}`, `clientv3.OpDelete(c.keys.Owner(g.Tenant, g.Task), clientv3.WithPrefix())}`).
		killedBy("./coordinator", "TestReleaseLeavesSiblingTasksHeld"),
	ind("holder/fence-create-revision", holderGo, "the holder's fence epoch is read from the fence's CreateRevision (its first claim)",
		`o.Fence = fence.ModRevision`, `o.Fence = fence.CreateRevision`),
	ind("holder/epoch-create-revision", holderGo, "the holder's epoch is read from the owner key's CreateRevision, not its ModRevision",
		`return string(owner.Value), owner.ModRevision, owner.Lease`, `return string(owner.Value), owner.CreateRevision, owner.Lease`),
	ind("holder/ttl-zero", holderGo, "a holder whose TTL is unknown reads as 0 seconds left, not -1",
		`o := &Ownership{Tenant: tenant, Task: task, TTLLeft: -1}`, `o := &Ownership{Tenant: tenant, Task: task, TTLLeft: 0}`),

	// ---- coordinator/attach.go and internal/store/lease.go (the gateway's renewals and sessions; planted
	// after the change, by a reader of the source only: all three survived
	// the gateway's tests, and renew_lease_test.go kills them)
	ind("attach/renewal-time-from-answer", storeLeaseGo, "RenewLease returns the answer's time as the send's, so a worker's deadline runs past etcd's expiry",
		`return time.Duration(resp.TTL) * time.Second, sent, nil`, `return time.Duration(resp.TTL) * time.Second, time.Now(), nil`),
	ind("attach/renew-not-mutating", storeLeaseGo, "RenewLease's lost answer is read as a hold, not outcome_unknown",
		`Request{Op: "renew", Mutating: true}`, `Request{Op: "renew", Mutating: false}`),
	ind("attach/fresh-deadline", attachGo, "Attach grants a fresh TTL from now instead of the renewal's deadline",
		"\t\tdeadline: deadline,", "\t\tdeadline: time.Now().Add(ttl),"),
	// (mutA's round, from the source only: the first two survived every
	// package's tests; the tests killedBy names, or coordinator's attach
	// tests, kill them)
	ind("attach/zero-lease", attachGo, "Attach accepts lease 0 (etcd's NoLease): the worker's owner keys would be put with no lease and never expire",
		"if lease <= 0 {\n\t\treturn nil, store.NewError(InvalidInput, \"session\"", "if lease < 0 {\n\t\treturn nil, store.NewError(InvalidInput, \"session\"").
		killedBy("./coordinator", "TestAttachZeroLeaseIsInvalid"),
	ind("attach/ttl-unchecked", attachGo, "Attach accepts a TTL CheckTTL refuses (zero, negative): the session's keepalive interval and deadline come from it",
		"if err := CheckTTL(ttl); err != nil {\n\t\treturn nil, store.NewError(InvalidInput, \"session\"", "if err := CheckTTL(ttl); err != nil && false {\n\t\treturn nil, store.NewError(InvalidInput, \"session\"").
		killedBy("./coordinator", "TestAttachZeroLeaseIsInvalid"),
	ind("attach/detach-stays-counted", attachGo, "Detach leaves the session in leasegate_sessions and the renewal age, for a lease this process no longer watches",
		"\ts.c.metrics.sessionEnded(s, \"\")\n", ""),
	// (a later round: judged equivalent, see its reason)
	ind("attach/zero-ttl-renewed", storeLeaseGo, "RenewLease takes a keepalive answered with TTL 0 (a lease etcd does not know) for a renewal",
		"\tif resp.TTL <= 0 {\n\t\treturn 0, sent, NewError(ExpiredOwner", "\tif resp.TTL < 0 {\n\t\treturn 0, sent, NewError(ExpiredOwner").
		equivalent("clientv3 (v3.7.3, lease.go KeepAliveOnce) turns an answer of TTL <= 0 into ErrLeaseNotFound itself, which classifySendError names expired_owner: no answer of TTL 0 reaches the check (TestRenewLeaseOfAGoneLeaseIsExpiredOwner passes on the mutant)"),

	// ---- coordinator/session.go
	ind("session/margin-min", sessionGo, "the default margin is the smaller of TTL/10 and the minimum",
		`margin: max(ttl/10, minMargin)`, `margin: min(ttl/10, minMargin)`).
		killedBy("./coordinator", "TestDefaultMarginIsTheLargerOfATenthAndTheMinimum"),
	ind("session/grant-deadline-from-answer", sessionGo, "the first local deadline counts from the lease grant's answer, not its send",
		`deadline: sent.Add(ttl - o.margin),`, `deadline: time.Now().Add(ttl - o.margin),`).
		killedBy("./coordinator", "TestFirstDeadlineCountsFromTheGrantsSend"),
	ind("session/renew-deadline-from-answer", keepAliveGo, "a renewal's local deadline counts from its answer, not its send",
		`d := r.sent.Add(time.Duration(r.ttl)*time.Second - s.margin)`, `d := time.Now().Add(time.Duration(r.ttl)*time.Second - s.margin)`),
	ind("session/renew-unbounded", keepAliveGo, "a hanging renewal is not cut at the local deadline",
		`rctx, cancel := context.WithDeadline(s.ctx, s.Deadline())`, `rctx, cancel := context.WithCancel(s.ctx)`),
	ind("session/attempt-unbounded", keepAliveGo, "a renewal attempt may take all the time left: one on a hung member leaves none for another",
		`ctx, cancel = context.WithTimeout(ctx, max(time.Until(dl)/2, minAttempt))`, `ctx, cancel = context.WithTimeout(ctx, max(time.Until(dl), minAttempt))`),
	ind("session/retry-rides-the-balancer", keepAliveGo, "a retry goes through the client's balancer, which may pick the hung member again",
		`if ep != "" {
		own, closeOwn, err := s.c.dialMember(ctx, ep)`, `if ep != "" && false {
		own, closeOwn, err := s.c.dialMember(ctx, ep)`),
	ind("session/margin-equal-ttl", sessionGo, "a margin equal to the TTL is accepted (the session is born past its deadline)",
		`if o.margin >= ttl {`, `if o.margin > ttl {`).
		killedBy("./coordinator", "TestZeroLeaseAndFullMarginAreInvalidInput"),
	ind("session/ttl-fraction", sessionGo, "a TTL that is not whole seconds is accepted (and rounded by etcd)",
		`if ttl <= 0 || ttl%time.Second != 0 {`, `if ttl <= 0 {`),
	ind("session/raised-ttl-accepted", sessionGo, "a TTL etcd raised to its minimum is accepted silently",
		`granted != ttl {`, `granted < ttl {`),
	ind("session/raised-ttl-lease-leaked", sessionGo, "the lease of a refused raised TTL is not revoked",
		`rerr := c.revoke(ctx, "session", int64(resp.ID))`, `var rerr error`),
	ind("session/usable-ignores-end", sessionGo, "a session whose lease was lost (deadline not yet passed) still claims",
		`if err := s.cause(); err != nil {`, `if err := s.cause(); err != nil && false {`).
		killedBy("./coordinator", "TestClosedSessionNeverClaims"),
	ind("session/usable-ignores-deadline", sessionGo, "a session past its local deadline acts until its timer fires",
		`if time.Now().After(s.Deadline()) {`, `if false {`).
		equivalent("Done closes at the local deadline, by the deadline timer (without keepalive) or the keepalive goroutine's; the check covers only the scheduling delay of that timer's callback, which no test can hold open"),
	ind("session/lease-lost-retried", keepAliveGo, "a keepalive told the lease is gone keeps retrying until the deadline",
		`case errors.Is(r.err, rpctypes.ErrLeaseNotFound):`, `case errors.Is(r.err, rpctypes.ErrLeaseNotFound) && false:`),
	ind("session/deadline-not-moved", keepAliveGo, "a confirmed renewal does not move the deadline timer",
		`deadline.Reset(time.Until(d))`, ``),
	ind("session/failed-renewal-retried-late", keepAliveGo, "a failed renewal attempt is not retried on the other members, only after a pause on the balancer",
		`if r = s.fanOut(ctx, r.member, &failures); done(r) {`, `if false {`),
	ind("session/fanout-only-the-failed", keepAliveGo, "the fan-out retries only the member that just failed, not every other one",
		`endpointHost(ep) != failed {`, `endpointHost(ep) == failed {`),
	ind("session/member-client-all-endpoints", keepAliveGo, "a member's own client (WithClientConfig) keeps every configured endpoint, so its balancer may pick the hung member again",
		"\tcfg.Endpoints = []string{ep}\n", ""),
	ind("session/zero-ttl-renewed", keepAliveGo, "a keepalive answered with TTL 0 (lease unknown) counts as a renewal, not lease lost",
		`if resp.TTL <= 0 { // etcd's answer`, `if resp.TTL < 0 { // etcd's answer`),
	ind("session/close-expired-error", sessionGo, "closing a session whose lease already expired is an error",
		`if DispositionOf(err) == ExpiredOwner { // already gone: nothing left to revoke`, `if DispositionOf(err) == ExpiredOwner && false {`).
		killedBy("./coordinator", "TestCloseAfterTheLeaseIsGoneIsNotAnError"),
	ind("revoke/zero-lease", leasesGo, "RevokeLease(0) is sent to etcd instead of refused as invalid_input",
		"if lease <= 0 {\n\t\treturn store.NewError(InvalidInput, \"lease revoke\"", "if lease < 0 {\n\t\treturn store.NewError(InvalidInput, \"lease revoke\"").
		killedBy("./coordinator", "TestZeroLeaseAndFullMarginAreInvalidInput"),

	// ---- coordinator/grants.go (Session.Grants)
	ind("grants/old-realm-listed", grantsGo, "Session.Grants lists owner keys older than the realm",
		`string(kv.Value) != s.owner || kv.ModRevision < realm.ModRevision {`, `string(kv.Value) != s.owner {`),
	ind("grants/any-lease", grantsGo, "Session.Grants lists owner keys of the same label on another lease",
		`if kv.Lease != int64(s.lease) || string(kv.Value) != s.owner`, `if string(kv.Value) != s.owner`),
	ind("grants/epoch-is-create-revision", grantsGo, "Session.Grants reports an owner key's create revision as the epoch: wrong for a claim over a stale key of the old realm",
		`Epoch: kv.ModRevision, Lease: int64(s.lease)})`, `Epoch: kv.CreateRevision, Lease: int64(s.lease)})`),
	ind("grants/any-label", grantsGo, "Session.Grants lists an owner key on the session's lease under another owner label",
		`if kv.Lease != int64(s.lease) || string(kv.Value) != s.owner || kv.ModRevision`, `if kv.Lease != int64(s.lease) || kv.ModRevision`).
		killedBy("./coordinator", "TestSessionGrantsShowsALostClaim"),

	// ---- internal/store/txn.go (the limits)
	ind("limits/max-ops-inclusive", limitsGo, "a Txn of exactly max-txn-ops ops is refused",
		`if n.n > max {`, `if n.n >= max {`),
	ind("limits/range-end-inclusive", limitsGo, "a put of a ranged delete's end key counts as overlapping",
		`bytes.Compare(key, d.to) < 0)`, `bytes.Compare(key, d.to) <= 0)`).
		killedBy("./coordinator", "TestTxnLimitsCountWhatEtcdCounts"),
	ind("limits/from-key-delete", limitsGo, "a from-key delete overlapping a put is not caught",
		`(bytes.Equal(d.to, []byte{0}) || bytes.Compare(key, d.to) < 0)`, `bytes.Compare(key, d.to) < 0`),
	ind("limits/double-put", limitsGo, "a key put twice in one branch is not caught",
		`if puts[k] {`, `if false {`),
	ind("limits/size-else-uncounted", limitsGo, "the size estimate leaves out the Else ops",
		`for _, ops := range [][]clientv3.Op{r.Then, r.Else} {`, `for _, ops := range [][]clientv3.Op{r.Then} {`).
		killedBy("./coordinator", "TestTxnLimitsCountWhatEtcdCounts"),

	// ---- coordinator/realm.go
	ind("metrics/register-failure-kept", metricsGo, "a New whose metrics fail to register leaves the ones it registered on the registry",
		"\t\t\tm.unregister()\n\t\t\treturn nil, fmt.Errorf(\"register metrics: %w\", err)", "\t\t\treturn nil, fmt.Errorf(\"register metrics: %w\", err)"),
	ind("metrics/closed-counts-failure", metricsGo, "a session closed by its owner counts a keepalive failure of reason \"\"",
		"\tif reason != \"\" {\n\t\tm.kaFailures.WithLabelValues(reason).Inc()", "\t{\n\t\tm.kaFailures.WithLabelValues(reason).Inc()"),
	ind("keys/parse-task-longer-keys", keysGo, "ParseTask takes a key of more segments (an operation record's) for a task key",
		"rest, found := strings.CutPrefix(key, k.prefix+\"/\")\n\tif !found {\n\t\treturn \"\", \"\", \"\", false\n\t}\n\tparts := strings.Split(rest, \"/\")\n\tif len(parts) != 3 {",
		"rest, found := strings.CutPrefix(key, k.prefix+\"/\")\n\tif !found {\n\t\treturn \"\", \"\", \"\", false\n\t}\n\tparts := strings.Split(rest, \"/\")\n\tif len(parts) < 3 {"),
	ind("realm/nested-off-by-one", realmGo, "the nesting check reads the realm itself as the first ancestor",
		`if store.FirstKV(rs[i+1]) != nil {`, `if store.FirstKV(rs[i]) != nil {`),
	ind("realm/rotate-origin-unwritten", realmGo, "a rotation does not record the new realm's origin",
		`then = append(then, clientv3.OpPut(c.keys.Origin(), origin))`, `_ = origin`),
	ind("realm/create-uncompared", realmGo, "New creates the realm without comparing that it is absent",
		`If:   append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(realmKey), "=", 0)}, c.noAncestorRealms()...),`,
		`If:   c.noAncestorRealms(),`),
	// (a later round, from the source only: survived every package's tests)
	ind("realm/create-ancestors-uncompared", realmGo, "New's create does not compare that the enclosing prefixes still hold no realm: a keyspace created at an ancestor between New's read and its create is nested in",
		`If:   append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(realmKey), "=", 0)}, c.noAncestorRealms()...),`,
		`If:   []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(realmKey), "=", 0)},`).
		killedBy("./coordinator", "TestNewRefusesAnAncestorCreatedAfterItsRead"),
	// (planted from the source only, one at a time: the first was killed by
	// the tests already there; the other two survived until
	// TestNestingIsCheckedAtEveryEnclosingPrefix and
	// TestNewHeldOnItsReadKeepsTheNestingCheck)
	ind("realm/nested-subtree-sibling", realmGo, "the nesting exemption of an ancestor's drill subtree also covers a sibling sharing its prefix (/lg/drillx/a)",
		`!strings.HasPrefix(p[i:], store.NestedSubtree)`, `!strings.HasPrefix(p[i:], strings.TrimSuffix(store.NestedSubtree, "/"))`).
		killedBy("./coordinator", "TestOpenNeverWrites"),
	ind("realm/outermost-ancestor-only", realmGo, "the nesting check reads the outermost enclosing prefix alone: a keyspace at /outer/lg does not enclose /outer/lg/a",
		`keys = append(keys, store.NewKeys(p[:i]).Realm())`, `return append(keys, store.NewKeys(p[:i]).Realm())`).
		killedBy("./coordinator", "TestNestingIsCheckedAtEveryEnclosingPrefix"),
	ind("realm/any-failure-skips-nesting", realmGo, "any failed realm read, a hold among them, is retried without the nesting check: New creates a keyspace inside another",
		`if DispositionOf(err) == PermissionDenied && len(c.ancestors) > 0 {`, `if err != nil && len(c.ancestors) > 0 {`).
		killedBy("./coordinator", "TestNewHeldOnItsReadKeepsTheNestingCheck"),
	// (a later round, from the source only: survived every package's
	// tests; TestRotationWhoseStatusReadsFailDropsTheOldOrigin kills it)
	ind("realm/rotate-old-origin-kept", realmGo, "a rotation whose status reads failed keeps the old realm's origin: realm show reports a realm written without leasegate instead of no origin recorded",
		"\t\tthen = append(then, clientv3.OpDelete(c.keys.Origin()))\n", ""),

	// ---- internal/store/keys.go
	ind("keys/percent-unescaped", keysGo, "a label with '%' but no '/' is not escaped",
		`if !strings.ContainsAny(label, "%/") {`, `if !strings.ContainsAny(label, "/") {`).
		killedBy("./internal/store", "TestKeysParseBackToTheirLabels"),
	ind("keys/unescape-step", keysGo, "unescape steps one byte past an escape instead of three",
		`i += 2`, `i++`).
		killedBy("./internal/store", "TestKeysParseBackToTheirLabels"),
	ind("keys/label-80-refused", keysGo, "a label of exactly 80 bytes is refused",
		`if len(s) > MaxLabelLen {`, `if len(s) >= MaxLabelLen {`),
	ind("keys/label-space", keysGo, "a label may contain a space",
		"c < 33 || c > 126 {\n\t\t\treturn fmt.Errorf(\"%s has byte", "c < 32 || c > 126 {\n\t\t\treturn fmt.Errorf(\"%s has byte"),
	ind("keys/journal-unpadded", keysGo, "journal entries are keyed by an unpadded seq (entry 10 sorts before 2)",
		`return fmt.Sprintf("%s%020d", k.JournalOperationPrefix(tenant, task, operation), seq)`, `return fmt.Sprintf("%s%d", k.JournalOperationPrefix(tenant, task, operation), seq)`).
		killedBy("./ledger", "TestJournalStaysInOrderPastNineTransitions"),
	ind("keys/tenant-prefix-open", keysGo, "a tenant's prefix lacks its trailing '/': tenant a covers tenant ab",
		"return k.prefix + \"/\" + string(kind) + \"/\" + escape(tenant) + \"/\"\n", "return k.prefix + \"/\" + string(kind) + \"/\" + escape(tenant)\n").
		killedBy("./internal/store", "TestPrefixesDoNotReachASibling"),
	ind("keys/effect-prefix-open", keysGo, "a task's effect prefix lacks its trailing '/': task t covers task t2",
		"return k.task(KindEffects, tenant, task) + \"/\"\n", "return k.task(KindEffects, tenant, task)\n").
		killedBy("./ledger", "TestTaskRecordsDoNotReachASiblingTask"),
	ind("keys/journal-op-prefix-open", keysGo, "an operation's journal prefix lacks its trailing '/': operation a covers a1",
		`return k.JournalPrefix(tenant, task) + escape(operation) + "/"`, `return k.JournalPrefix(tenant, task) + escape(operation)`).
		killedBy("./internal/store", "TestPrefixesDoNotReachASibling"),
	ind("keys/journal-prefix-open", keysGo, "a task's journal prefix lacks its trailing '/': task t covers task t2",
		`return k.task(KindJournal, tenant, task) + "/"`, `return k.task(KindJournal, tenant, task)`).
		killedBy("./internal/store", "TestPrefixesDoNotReachASibling"),
	ind("keys/prefix-trailing-slash", keysGo, "a prefix ending in '/' is accepted",
		`if strings.HasSuffix(p, "/") {`, `if false {`),

	// ---- internal/store/disposition.go
	ind("disposition/no-space-unclassed", dispGo, "no_space is not a hold (its class is unknown)",
		`{NoSpace, ClassUnavailable,`, `{NoSpace, ClassUnknown,`),
	ind("disposition/foreign-error-hold", dispGo, "an error of no leasegate package reads as a hold, not outcome_unknown",
		"\treturn OutcomeUnknown\n}\n\n// NewError is", "\treturn AuthorityUnavailable\n}\n\n// NewError is"),
	ind("disposition/no-sentinel", dispGo, "errors.Is does not match an *Error to its disposition's sentinel",
		`if m, ok := meanings[e.Disposition]; ok && m.Sentinel != nil {`, `if m, ok := meanings[e.Disposition]; ok && m.Sentinel != nil && false {`),
	ind("disposition/sentinel-swapped", dispGo, "stale_owner unwraps to ErrExpiredOwner",
		`400, ErrStaleOwner,`, `400, ErrExpiredOwner,`),
	ind("disposition/no-space-sentinel-unavailable", dispGo, "no_space unwraps to ErrAuthorityUnavailable, not ErrNoSpace",
		`429, ErrNoSpace,`, `429, ErrAuthorityUnavailable,`),
	ind("disposition/unwrap-drops-cause", dispGo, "an *Error with a sentinel no longer unwraps to its cause",
		"\t\terrs = append(errs, m.Sentinel)\n\t}\n\tif e.Err != nil {", "\t\treturn append(errs, m.Sentinel)\n\t}\n\tif e.Err != nil {"),
	ind("disposition/outcome-unknown-hold", dispGo, "outcome_unknown is classed as a hold (ClassUnavailable), as though nothing was written",
		`{OutcomeUnknown, ClassOutcomeUnknown,`, `{OutcomeUnknown, ClassUnavailable,`),

	// ---- coordinator/disposition.go (a later round, from the source only:
	// both survived every package's tests)
	ind("reexport/sentinel-other", coordDispGo, "coordinator.ErrLimitExceeded is store's ErrBusy: errors.Is on a limit_exceeded misses it, and a busy answer matches it",
		`ErrLimitExceeded        = store.ErrLimitExceeded`, `ErrLimitExceeded        = store.ErrBusy`).
		killedBy("./coordinator", "TestReexportsAreTheStoreTablesOwn"),
	ind("reexport/class-other", coordDispGo, "coordinator.ClassNotFound is store's ClassDenied: a caller switching on it takes no_keyspace for a denial",
		`ClassNotFound       = store.ClassNotFound`, `ClassNotFound       = store.ClassDenied`).
		killedBy("./coordinator", "TestReexportsAreTheStoreTablesOwn"),

	// ---- internal/store/transport.go
	indN("classify/read-before-auth", transportGo, "a failed read is a hold before auth or NOSPACE are looked at: permission_denied on a read reads as unavailable",
		Edit{"\tcase !r.Mutating:\n\t\treturn NewError(AuthorityUnavailable, r.Op, r.Tenant, r.Task, \"read failed\", err)\n", ""},
		Edit{"\tcase deniedByAuth(err, code):", "\tcase !r.Mutating:\n\t\treturn NewError(AuthorityUnavailable, r.Op, r.Tenant, r.Task, \"read failed\", err)\n\tcase deniedByAuth(err, code):"}),
	ind("classify/untracked-is-hold", transportGo, "a failed write on a client without DialOptions is a hold, not outcome_unknown",
		"return NewError(OutcomeUnknown, r.Op, r.Tenant, r.Task,\n\t\t\t\"the etcd client lacks", "return NewError(AuthorityUnavailable, r.Op, r.Tenant, r.Task,\n\t\t\t\"the etcd client lacks"),
	ind("classify/sent-inverted", transportGo, "the sent flag is read inverted: a sent write is a hold, an unsent one unknown",
		`case !t.sent.Load():`, `case t.sent.Load():`),
	ind("classify/unavailable-not-applied", transportGo, "gRPC Unavailable counts as refused before applying: a sent write that lost its answer is a hold",
		`case codes.FailedPrecondition, codes.OutOfRange:`, `case codes.FailedPrecondition, codes.OutOfRange, codes.Unavailable:`),
	ind("do/no-tracker", transportGo, "the send tracker is not attached to the request",
		`err := f(context.WithValue(ctx, trackerKey{}, t))`, `err := f(ctx)`),
	ind("do/no-request-timeout", transportGo, "a request without a deadline is not bounded by the request timeout",
		`ctx, cancel = context.WithTimeoutCause(ctx, s.limits.RequestTimeout, errRequestTimeout)`, `ctx, cancel = context.WithCancel(ctx)`),
	ind("leases/any-task-key-an-owner", leasesGo, "a lease revoke counts any task key of the keyspace (a state key, say) as an owner key: the lease is revoked with it",
		`if kind, _, _, ok := c.keys.ParseTask(string(k)); ok && kind == KindOwner {`, `if _, _, _, ok := c.keys.ParseTask(string(k)); ok {`),
	ind("do/timeout-deadline-unchecked", transportGo, "an answer at the deadline, before the timer fired (etcd's own answer to it), is not named the request timeout's",
		`return !time.Now().Before(d)`, `return false && !time.Now().Before(d)`),
	ind("do/timeout-no-deadline-exceeded", transportGo, "a failure at the request timeout answered by etcd holds no context.DeadlineExceeded",
		`if !errors.Is(err, context.DeadlineExceeded) {`, `if false {`),
	ind("classify/unauthenticated-unknown", transportGo, "an Unauthenticated answer is not permission_denied",
		`return code == codes.Unauthenticated`, `return false`),
	ind("classify/lease-not-found-unnamed", transportGo, "etcd's lease-not-found is not expired_owner",
		`case errors.Is(err, rpctypes.ErrLeaseNotFound):`, `case errors.Is(err, rpctypes.ErrLeaseNotFound) && false:`),
	ind("txn/always-mutating", storeTxnGo, "a read-only Txn is classified as a write: a failed read can be outcome_unknown",
		`Mutating: !r.ReadOnly}`, `Mutating: true}`),
	ind("txn/unchecked", storeTxnGo, "a Txn etcd can never accept is sent instead of refused before I/O",
		`if err := s.checkTxn(r); err != nil {`, `if err := s.checkTxn(r); err != nil && false {`),

	// ---- coordinator/leases.go
	ind("leases/stale-unmarked", leasesGo, "lease listings compare owner keys with the realm's CreateRevision: keys from before a rotation are not stale",
		`Stale: realm != nil && kv.ModRevision < realm.ModRevision})`, `Stale: realm != nil && kv.ModRevision < realm.CreateRevision})`),
	ind("lease/zero-id", leasesGo, "Lease(0) is sent to etcd instead of refused as invalid_input",
		"if id <= 0 {\n\t\treturn LeaseInfo{}, store.NewError(InvalidInput, \"lease show\"", "if id < 0 {\n\t\treturn LeaseInfo{}, store.NewError(InvalidInput, \"lease show\"").
		killedBy("./coordinator", "TestZeroLeaseAndFullMarginAreInvalidInput"),
	ind("lease/expired-shown", leasesGo, "an expired lease is shown empty instead of expired_owner",
		`if li.TTLLeft < 0 && li.GrantedTTL == 0 {`, `if false {`),
	ind("revoke/limits-sibling", leasesGo, "RevokeOwnerLease takes a key under a sibling of the limits prefix (<prefix>/limitsX/) for a gateway's limit unit",
		`strings.HasPrefix(string(k), c.keys.LimitsRoot())`, `strings.HasPrefix(string(k), strings.TrimSuffix(c.keys.LimitsRoot(), "/"))`).
		killedBy("./coordinator", "TestRevokeOwnerLeaseRefusesLimitKeysAloneAndTheirSiblings"),
	ind("revoke/no-owner-accepted", leasesGo, "RevokeOwnerLease revokes a lease that carries no owner key (only a limit unit)",
		"\tcase owners == 0:", "\tcase owners < 0:").
		killedBy("./coordinator", "TestRevokeOwnerLeaseRefusesLimitKeysAloneAndTheirSiblings"),

	// ---- coordinator/restore.go
	ind("origin/distance-sign", restoreGo, "revision − raft index is computed the other way round: a restore looks like a shrink",
		`func (o Origin) distance() int64 { return o.Revision - int64(o.RaftIndex) }`, `func (o Origin) distance() int64 { return int64(o.RaftIndex) - o.Revision }`),
	ind("origin/cluster-id-unchecked", restoreGo, "another cluster ID than the origin's raises no warning",
		`if o.ClusterID != now.ClusterID {`, `if false {`),
	ind("origin/two-clusters-accepted", restoreGo, "endpoints answering for two clusters are not refused",
		`if answered && o.ClusterID != best.ClusterID {`, `if false {`).
		killedBy("./coordinator", "TestEndpointsOfTwoClustersAreRefused"),
	// (a later round, from the source only: these two survived every
	// package's tests; origin_test.go kills them)
	ind("origin/check-largest-distance", restoreGo, "checking an origin reads the member with the largest revision − raft index: a member behind the others can make the realm look restored",
		`(!largest && o.distance() < best.distance())`, `(!largest && o.distance() > best.distance())`),
	ind("origin/record-over-rewritten-realm", restoreGo, "New records the origin without comparing the realm key's ModRevision with its create's: a realm key written since with the same value (a copy from another cluster) gets this cluster's origin",
		`, clientv3.Compare(clientv3.ModRevision(c.keys.Realm()), "=", rev)}`, `}`),

	// ---- coordinator/ownership.go
	ind("owned/stale-owned", storeOwnershipGo, "an owner key from before the realm counts as owned",
		`func (o Ownership) Owned() bool { return o.Owner != "" && !o.Stale }`, `func (o Ownership) Owned() bool { return o.Owner != "" }`),
	// (a later round, from the source only: these two survived every
	// package's tests)
	ind("ownership/unheld-stale", ownershipGo, "a task nobody holds reads as stale (no owner key, so epoch 0, is older than every realm)",
		`if o.Owner != "" && realm != nil && o.Epoch < realm.ModRevision {`, `if realm != nil && o.Epoch < realm.ModRevision {`).
		killedBy("./coordinator", "TestATaskNobodyHoldsIsNeitherStaleNorTimed"),
	ind("ownership/list-ttl-zero", ownershipGo, "List shows a task nobody holds with 0 seconds left instead of -1 (unknown)",
		`o = &Ownership{Tenant: t, Task: task, TTLLeft: -1, Revision: resp.Header.Revision}`, `o = &Ownership{Tenant: t, Task: task, TTLLeft: 0, Revision: resp.Header.Revision}`).
		killedBy("./coordinator", "TestATaskNobodyHoldsIsNeitherStaleNorTimed"),
	// (planted from the source only, one at a time: the first two were
	// killed by the tests already there; the third survived until
	// TestOwnerReadsNoSiblingTask)
	ind("ownership/stale-by-create-revision", ownershipGo, "an owner key is marked stale by the realm key's CreateRevision: a key from before a rotation reads current",
		`if o.Owner != "" && realm != nil && o.Epoch < realm.ModRevision {`, `if o.Owner != "" && realm != nil && o.Epoch < realm.CreateRevision {`).
		killedBy("./coordinator", "TestLeasesAndStaleOwners"),
	ind("ownership/list-owners-every-tenant", ownershipGo, "List of one tenant reads the owner keys of every tenant: another tenant's held tasks are listed",
		`clientv3.OpGet(k.TaskPrefix(KindOwner, tenant), clientv3.WithPrefix()),`, `clientv3.OpGet(k.TaskPrefix(KindOwner, ""), clientv3.WithPrefix()),`).
		killedBy("./coordinator", "TestKeyInjectivity"),
	ind("ownership/owner-read-as-prefix", ownershipGo, "Owner reads the owner key as a prefix: a task nobody holds shows the holder of a sibling whose name starts with its own (job of job-1)",
		`clientv3.OpGet(k.Owner(tenant, task)),`, `clientv3.OpGet(k.Owner(tenant, task), clientv3.WithPrefix()),`).
		killedBy("./coordinator", "TestOwnerReadsNoSiblingTask"),

	// ---- coordinator/watch.go
	ind("watch/rev-overlap", watchGo, "the ownership watch starts at the last revision delivered, not after it",
		`clientv3.WithRev(w.rev+1), clientv3.WithPrevKV()`, `clientv3.WithRev(w.rev), clientv3.WithPrevKV()`).
		killedBy("./coordinator", "TestWatchAcrossLeaderStopsAndQuorumLoss"),
	ind("watch/resync-ignores-epoch", watchGo, "a re-list after a compaction misses a task re-claimed meanwhile (same key, new epoch)",
		`if cur, still := now[key]; !still || cur.Epoch != w.known[key].Epoch {`, `if cur, still := now[key]; !still || cur.Epoch < 0 {`).
		killedBy("./coordinator", "TestWatchCutReportsAReclaimAsVacatedThenOwned"),
	ind("watch/stale-delete-reported", watchGo, "the deletion of an owner key vacated at a rotation is reported again",
		`return true // a stale key going away: it was vacated at the rotation`, ``).
		killedBy("./coordinator", "TestWatchReportsAStaleKeyOnce"),
	ind("watch/rotation-ignored", watchGo, "a realm rotation does not vacate the owners it cut off",
		`if o := w.known[k]; o.Epoch < ev.Kv.ModRevision {`, `if o := w.known[k]; false {`),

	// ---- internal/store/leaseid.go
	ind("leaseid/16-digits-decimal", leaseIDGo, "a 16-digit lease ID without a-f is read as decimal, not hex",
		`case len(t) == 16 || strings.ContainsAny(t, "abcdefABCDEF"):`, `case strings.ContainsAny(t, "abcdefABCDEF"):`).
		killedBy("./internal/store", "TestParseLeaseID"),
	ind("leaseid/zero-accepted", leaseIDGo, "lease ID 0 parses",
		`if u == 0 || u > 1<<63-1 {`, `if u > 1<<63-1 {`).
		killedBy("./internal/store", "TestParseLeaseID"),
	ind("leaseid/0x-ignored", leaseIDGo, "a lease ID written 0x… (lowercase) is not read as hex",
		`case strings.HasPrefix(t, "0x") || strings.HasPrefix(t, "0X"):`, `case strings.HasPrefix(t, "0X"):`).
		killedBy("./internal/store", "TestParseLeaseID"),
	ind("leaseid/json-negative", leaseIDGo, "a hex lease ID over 2^63-1 in JSON reads as a negative lease",
		`if err != nil || u > 1<<63-1 {`, `if err != nil {`),

	// ---- fencedtxn/commit.go
	ind("commit/scope-task-only", commitGo, "an intent for another tenant's task of the same name is not scope_mismatch",
		`if in.Tenant != g.Tenant || in.Task != g.Task {`, `if in.Task != g.Task {`).
		killedBy("./fencedtxn", "TestIntentForAnotherTenantsTaskIsScopeMismatch"),
	ind("commit/range-op-accepted", commitGo, "a caller op that is a range is accepted",
		`if len(op.RangeBytes()) > 0 {`, `if false {`).
		killedBy("./fencedtxn", "TestCallerOpThatIsARangeIsInvalidInput"),
	ind("commit/prefix-op-accepted", commitGo, "a caller op inside leasegate's prefix is accepted unless it is a state key",
		`key == "" || strings.HasPrefix(key, prefix) {`, `key == "" || strings.HasPrefix(key, prefix+"state/") {`),
	ind("commit/prefix-no-slash", commitGo, "a caller op under a sibling prefix (/leasegate-x) is refused as inside leasegate's",
		`prefix := c.Keys().Prefix() + "/"`, `prefix := c.Keys().Prefix()`).
		killedBy("./fencedtxn", "TestCallerOpUnderASiblingPrefixCommits"),
	ind("commit/no-op-compare", commitGo, "the commit does not compare that the operation is unrecorded",
		`clientv3.Compare(clientv3.CreateRevision(opKey), "=", 0),`, ``),
	ind("commit/no-version-compare", commitGo, "the commit does not compare the state's version",
		`clientv3.Compare(clientv3.Version(stateKey), "=", in.ExpectedVersion))`, `)`),
	ind("commit/receipt-version", commitGo, "the receipt's committed version is the expected one, not the next",
		`CommittedVersion: in.ExpectedVersion + 1, Epoch: g.Epoch}`, `CommittedVersion: in.ExpectedVersion, Epoch: g.Epoch}`),
	ind("commit/digest-unchecked", commitGo, "a retry with another payload is a historical_retry, not operation_conflict",
		`if rec.PayloadDigest != digest {`, `if false {`),
	ind("commit/retry-revision-now", commitGo, "a historical retry's receipt carries the retry's revision, not the original commit's",
		`prior.Revision = opKV[0].ModRevision`, `prior.Revision = resp.Header.Revision`),
	ind("commit/digest-no-version", commitGo, "the payload digest leaves out the expected version",
		`[]byte(in.Operation), in.Value, v[:])`, `[]byte(in.Operation), in.Value)`),
	ind("commit/digest-no-length", "internal/digest/digest.go", "the payload digest's fields are not length-prefixed",
		`h.Write(n[:])`, `_ = n`),
	ind("commit/session-unchecked", commitGo, "WithSession does not refuse a session that can no longer act",
		`if err := o.session.Err(); err != nil {`, `if err := o.session.Err(); err != nil && false {`),
	ind("commit/value-limit-inclusive", commitGo, "a value of exactly the limit is refused",
		`if len(in.Value) > o.maxValue {`, `if len(in.Value) >= o.maxValue {`).
		killedBy("./fencedtxn", "TestValueOfExactlyTheLimitCommits"),
	ind("commit/guard-refusal-skipped", commitGo, "a failed guard is not classified: the refusal reads as a version conflict or retry",
		`if err := store.Of(c).CheckGuard("commit", g, resp.Responses[:3]); err != nil {`, `if err := store.Of(c).CheckGuard("commit", g, resp.Responses[:3]); err != nil && false {`),
	ind("commit/receipt-no-revision", commitGo, "a first commit's receipt carries no revision",
		`receipt.Revision = resp.Header.Revision`, ``),

	// ---- internal/store/guard.go (the cache is each coordinator's own, so
	// no mutation can key it across coordinators), fencedtxn/encode.go, state.go
	ind("guardcache/any-entry", guardCacheGo, "the guard cache hands out any entry: a later grant of the task gets an earlier grant's compares",
		`e, ok := s.guards[g]`, "e, ok := guarded{}, false\n\tfor _, first := range s.guards {\n\t\te, ok = first, true\n\t\tbreak\n\t}"),
	ind("guardcache/unbounded", guardCacheGo, "the guard cache is never cleared: its memory grows with every grant a long-lived process guards",
		`if s.guards == nil || len(s.guards) >= maxGuards {`, `if s.guards == nil {`).
		killedBy("./internal/store", "TestGuardCacheIsBounded"),
	ind("guardcache/bound-off-by-one", guardCacheGo, "the guard cache holds one grant over its bound",
		`if s.guards == nil || len(s.guards) >= maxGuards {`, `if s.guards == nil || len(s.guards) > maxGuards {`).
		killedBy("./internal/store", "TestGuardCacheIsBounded"),
	ind("guardcache/shared-slice", guardCacheGo, "the cached compares are handed out as the shared slice: appends of concurrent commits overwrite each other",
		`cmps := append(make([]clientv3.Cmp, 0, len(e.cmps)+extra), e.cmps...)`, `cmps := e.cmps`).
		killedBy("./fencedtxn", "TestConcurrentCommitsKeepTheirOwnCompares"),
	ind("encode/quote-unescaped", encodeGo, "a '\"' in a label is written unescaped into the stored JSON",
		`case '"':`, `case 0:`),
	ind("get/not-read-only", stateGo, "Get is sent as a write: a lost answer reads as outcome_unknown",
		`Task: task, ReadOnly: true,`, `Task: task, ReadOnly: false,`).
		killedBy("./fencedtxn", "TestGetWithItsAnswerLostIsAHold"),
	ind("get/revision-create", stateGo, "State.Revision is the state key's CreateRevision, not the last commit's",
		`st.Revision = kvs[0].ModRevision`, `st.Revision = kvs[0].CreateRevision`),

	// ---- ledger/transition.go
	ind("ledger/table-confirmed-reauthorized", transitionGo, "the table lets reconcile move a CONFIRMED record back to AUTHORIZED",
		`{Dispatching, Confirmed, StepDispatch},`, "{Dispatching, Confirmed, StepDispatch},\n\t{Confirmed, Authorized, StepReconcile},"),
	ind("ledger/table-no-takeover-unknown", transitionGo, "the table lacks DISPATCHING to UNKNOWN by reconcile (an older epoch's dispatch)",
		`{Dispatching, Unknown, StepReconcile},   // an older epoch's dispatch, on takeover`, ``),
	ind("ledger/record-compare-exists", transitionGo, "a transition compares only that the record exists, not its revision",
		`recCmp := clientv3.Compare(clientv3.ModRevision(key), "=", rec.Revision)`, `recCmp := clientv3.Compare(clientv3.ModRevision(key), ">", 0)`),
	ind("ledger/journal-overwrite", transitionGo, "a transition's journal entry is written under the previous seq",
		`clientv3.OpPut(store.Of(l.c).Keys().JournalEntry(g.Tenant, g.Task, rec.Operation, next.Seq), string(entryValue)),`, `clientv3.OpPut(store.Of(l.c).Keys().JournalEntry(g.Tenant, g.Task, rec.Operation, rec.Seq), string(entryValue)),`),
	ind("ledger/transition-unguarded", transitionGo, "a transition is not fenced by the grant",
		`If:   append(cmps, recCmp),`, `If:   append(cmps[:0:0], recCmp),`),
	ind("ledger/same-decision-any-epoch", transitionGo, "a repeated Reject/Resolve under another grant is taken as the same decision",
		`t.By == ch.by && t.Epoch == g.Epoch && t.Owner == g.Owner`, `t.By == ch.by && t.Owner == g.Owner`),
	ind("ledger/moved-illegal-as-conflict", transitionGo, "a record that moved to a state the step may not leave is version_conflict, not illegal_transition",
		`if !Allowed(cur.State, ch.to, ch.by) {`, `if false {`).
		killedBy("./ledger", "TestTransitionFromAMovedRecordNamesWhereItIs"),

	// ---- ledger/record.go
	ind("ledger/terminal-unknown-state", recordGo, "a state the ledger does not know reads as terminal",
		`if _, err := ParseState(string(s)); err != nil {`, `if _, err := ParseState(string(s)); err != nil && false {`),
	ind("ledger/evidence-whitespace", recordGo, "whitespace detail counts as evidence",
		`t := bytes.TrimSpace(d)`, `t := d`).
		killedBy("./ledger", "TestEvidenceAndParamsAreCheckedBeforeAnyIO"),
	ind("ledger/evidence-placeholder", recordGo, "a placeholder detail (null, \"\", {}, []) counts as evidence",
		`case 'n', '"', '{', '[':`, `case 0:`).
		killedBy("./ledger", "TestEvidenceThatSaysNothingIsEmpty"),
	ind("ledger/canonical-trailing", recordGo, "params holding two JSON values are accepted (the second ignored)",
		`if d.More() {`, `if false {`).
		killedBy("./ledger", "TestEvidenceAndParamsAreCheckedBeforeAnyIO"),
	ind("ledger/approval-digest-no-note", recordGo, "the approval digest leaves out the note",
		`a.At.UTC().Format(time.RFC3339Nano), a.Note)`, `a.At.UTC().Format(time.RFC3339Nano))`).
		killedBy("./ledger", "TestOnlyTheSameApprovalRepeatsOnAnAuthorizedRecord"),
	ind("ledger/empty-provider-id", recordGo, "an empty provider id is accepted as evidence",
		`if id == "" || len(id) > maxProviderIDLen {`, `if len(id) > maxProviderIDLen {`).
		killedBy("./ledger", "TestEvidenceAndParamsAreCheckedBeforeAnyIO"),

	// ---- ledger/gateway.go
	indN("ledger/dispatch-remints-id", gatewayGo, "each attempt to record the dispatch claim mints a new dispatch id: after a lost answer the claim is not recognised as ours",
		Edit{`at, id := l.now().UTC(), uuid.NewString()`, `at := l.now().UTC()`},
		Edit{`r.Attempts+1, at, id`, `r.Attempts+1, at, uuid.NewString()`}),
	ind("ledger/persist-any-dispatch", gatewayGo, "after a lost answer, a record at the target state is taken as ours whatever its dispatch id",
		`out.Seq == from.Seq+1 && out.DispatchID == want.DispatchID:`, `out.Seq == from.Seq+1:`),
	ind("ledger/persist-unknown-forgotten", gatewayGo, "a transition whose answer was lost is retried as if it never applied",
		`unknown = true`, ``),
	ind("ledger/dispatch-any-hint", readsGo, "Dispatch and Authorize decide on the ledger's hint of a record whatever state it was in, instead of reading it",
		`if rec, ok := l.hints.get(g.Tenant, g.Task, operation); ok && rec.State == want {`, `if rec, ok := l.hints.get(g.Tenant, g.Task, operation); ok {`),
	ind("ledger/apply-old-epoch", gatewayGo, "Apply is called with the record's previous epoch, not the dispatching grant's",
		"Epoch: g.Epoch,\n\t\tAttempt: claimed.Attempts", "Epoch: rec.Epoch,\n\t\tAttempt: claimed.Attempts"),
	ind("ledger/outcome-cancellable", gatewayGo, "the provider's answer is recorded under the caller's context: a cancel after Apply loses it",
		`ctx = context.WithoutCancel(ctx)`, `_ = context.WithoutCancel(ctx)`).
		killedBy("./ledger", "TestProviderAnswerIsRecordedAfterTheCallerGivesUp"),
	ind("ledger/confirm-without-evidence", gatewayGo, "an Apply that answered without evidence is CONFIRMED",
		`case err == nil && !ev.Empty():`, `case err == nil:`),
	ind("ledger/refused-without-evidence-failed", gatewayGo, "a refusal without evidence is FAILED",
		`case errors.As(err, &refused) && !refused.Evidence.Empty():`, `case errors.As(err, &refused):`),
	ind("ledger/ambiguous-failed", gatewayGo, "an ambiguous Apply error is FAILED, not UNKNOWN",
		`ch := change{to: Unknown, by: StepDispatch, reason: "ambiguous: " + truncate(err.Error())}`, `ch := change{to: Failed, by: StepDispatch, reason: "ambiguous: " + truncate(err.Error())}`),
	ind("ledger/propose-any-digest", intentGo, "Propose of an existing operation with another effect returns the record",
		`if out.ParamsDigest == d {`, `if out.Operation == operation {`),
	ind("ledger/authorize-any-world", intentGo, "an approval of another observed world is accepted",
		`case a.PreconditionDigest != rec.Precondition.Digest:`, `case a.PreconditionDigest == "":`),
	ind("ledger/authorize-repeat-any", intentGo, "any approval of an AUTHORIZED record returns it unchanged",
		`if rec.State == Authorized && rec.Approval != nil && sameApproval(*rec.Approval, a) {`, `if rec.State == Authorized {`).
		killedBy("./ledger", "TestOnlyTheSameApprovalRepeatsOnAnAuthorizedRecord"),
	ind("ledger/record-revision-create", decodeGo, "a record's revision is read from its CreateRevision: the next transition compares the wrong revision",
		`rec.Revision = kvs[0].ModRevision`, `rec.Revision = kvs[0].CreateRevision`),

	// ---- ledger/reconcile.go
	ind("reconcile/own-epoch", reconcileGo, "Reconcile marks this epoch's own in-flight dispatch UNKNOWN",
		`takeover := rec.State == Dispatching && rec.Epoch < g.Epoch`, `takeover := rec.State == Dispatching && rec.Epoch <= g.Epoch`),
	ind("reconcile/applied-no-evidence", reconcileGo, "an Observe of applied without evidence is CONFIRMED",
		`case outcome == Applied && ev.Empty():`, `case false:`),
	indN("reconcile/not-applied-trusted-without-lookup", reconcileGo, "without a lookup by id, one observation of not applied is trusted at once",
		Edit{"\tlookup := ad.Contract().Lookup\n", ""},
		Edit{`case outcome == NotApplied && lookup:`, `case outcome == NotApplied:`}),
	ind("reconcile/supersede-without-contract", reconcileGo, "not applied in a changed world supersedes even when a late attempt could still land (no Lookup, no Conditional)",
		`case changed && lateRuledOut:`, `case changed:`),
	ind("reconcile/not-retry-safe", reconcileGo, "not applied is re-authorized even for a provider whose retries are not safe",
		`canRetry := c.RetrySafe && retained`, `canRetry := retained`),
	ind("reconcile/retention-boundary", reconcileGo, "a dispatch exactly one retention old is retried",
		`age < c.Retention`, `age <= c.Retention`).
		killedBy("./ledger", "TestNotAppliedExactlyARetentionLaterIsManualReview"),
	ind("reconcile/precondition-error-supersedes", reconcileGo, "a precondition that cannot be observed supersedes the record",
		`changed := err == nil && why != ""`, `changed := err != nil || why != ""`).
		killedBy("./ledger", "TestNotAppliedWithThePreconditionUnobservableIsNotSuperseded"),
	ind("reconcile/inconclusive-stays", reconcileGo, "inconclusive past the bound stays UNKNOWN instead of MANUAL_REVIEW",
		`if last == Pending {`, `if last == Pending || last == Inconclusive {`),
	ind("resolve/failed-no-evidence", resolveGo, "Resolve to FAILED without evidence is accepted",
		`if (to == Confirmed || to == Failed) && ev.Empty() {`, `if to == Confirmed && ev.Empty() {`).
		killedBy("./ledger", "TestEvidenceAndParamsAreCheckedBeforeAnyIO"),

	// ---- retention/collector.go
	indN("gc/mark-clock-before-revision", collectorGo, "a mark's time is read before its revision is learned",
		Edit{"\tresp, err := store.Of(g.c).Txn(ctx, store.TxnRequest{Op: \"gc mark\",", "\tat := g.now().UTC()\n\tresp, err := store.Of(g.c).Txn(ctx, store.TxnRequest{Op: \"gc mark\","},
		Edit{"\tat := g.now().UTC()\n\t_, err = store.Of(g.c).Txn(", "\t_, err = store.Of(g.c).Txn("}).
		killedBy("./retention", "TestMarksAndPlans"),
	ind("gc/mark-seconds", collectorGo, "marks are stamped to the second: a mark reads up to 1s older than it is",
		`OpPut(g.lk.RetentionMark(rev), at.Format(time.RFC3339Nano))`, `OpPut(g.lk.RetentionMark(rev), at.Format(time.RFC3339))`).
		killedBy("./retention", "TestMarksAndPlans"),
	ind("gc/horizon-oldest", collectorGo, "the horizon is the oldest old mark, not the newest",
		`if m.rev > newest.rev {`, `if m.rev < newest.rev {`),
	ind("gc/horizon-mark-collected", collectorGo, "the horizon's own mark is collected with the older ones",
		`if m.rev < newest.rev {`, `if m.rev <= newest.rev {`).
		killedBy("./retention", "TestMarksAndPlans"),
	ind("gc/effects-unresolved", collectorGo, "ledger records are collected whatever their state",
		`if json.Unmarshal(kv.Value, &rec) != nil || !resolved(rec.State) {`, `if json.Unmarshal(kv.Value, &rec) != nil {`),
	ind("gc/owned-by-owner-key", collectorGo, "owned tasks are recorded by owner key, so no fence reads as owned in the plan",
		`owned[g.keys.Fence(tenant, task)] = true`, `owned[g.keys.Owner(tenant, task)] = true`),
	ind("gc/op-guard-dropped", collectorGo, "an operation record is deleted without comparing the state's version",
		`cmps = append(cmps, clientv3.Compare(clientv3.Version(g.keys.State(c.Tenant, c.Task)), ">", c.MinStateVersion-1))`, ``),
	ind("gc/op-guard-off-by-one", collectorGo, "an operation record is deleted while the state is one version short of it",
		`">", c.MinStateVersion-1))`, `">", c.MinStateVersion-2))`),
	ind("gc/fence-guard-dropped", collectorGo, "a fence is deleted without comparing that nobody owns the task",
		`cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(g.keys.Owner(c.Tenant, c.Task)), "=", 0))`, ``),
	ind("gc/candidate-key-unchecked", collectorGo, "Apply does not check a mark candidate's key against the mark it names",
		`if c.Key != g.keyOf(c) {`, `if false {`),
	ind("gc/candidate-fields-unchecked", collectorGo, "Apply does not check a candidate's key against its tenant, task and operation",
		`} else if want := g.keyOf(c); c.Key != want {`, `} else if want := g.keyOf(c); false && c.Key != want {`),
	ind("gc/prefix-no-slash", collectorGo, "Apply accepts a candidate under a sibling prefix (/leasegate-x)",
		`!strings.HasPrefix(c.Key, g.keys.Prefix()+"/") {`, `!strings.HasPrefix(c.Key, g.keys.Prefix()) {`).
		equivalent("since 166d107 every candidate's key must equal the key its fields name (a mark's included), and those are all under <prefix>/: a sibling-prefix key is refused by that check whatever the prefix test says"),
	ind("gc/journal-kept", collectorGo, "a collected ledger record's journal entries are left behind",
		`dels = append(dels, clientv3.OpDelete(g.lk.JournalOperationPrefix(c.Tenant, c.Task, c.Operation), clientv3.WithPrefix()))`, ``),
	ind("gc/batch-all-kept", collectorGo, "one failed guard keeps its whole batch",
		"r.Deleted = append(r.Deleted, batch...)\n\t\t\tcontinue\n\t\t}", "r.Deleted = append(r.Deleted, batch...)\n\t\t\tcontinue\n\t\t}\n\t\tr.Kept = append(r.Kept, batch...)\n\t\tcontinue").
		killedBy("./retention", "TestMarksAndPlans"),
	ind("gc/page-overlap", collectorGo, "a scan's next page starts at the last key read, not after it",
		`from = string(rr.Kvs[len(rr.Kvs)-1].Key) + "\x00"`, `from = string(rr.Kvs[len(rr.Kvs)-1].Key)`).
		killedBy("./retention", "TestMarksAndPlans"),
	ind("gc/batch-over-limit", collectorGo, "a batch of deletes holds more compares than etcd's max-txn-ops",
		`const batchSize = 50`, `const batchSize = 100`),
	ind("gc/min-version-zero", collectorGo, "Apply accepts an operation candidate without the version it committed",
		`if c.Kind == KindOp && c.MinStateVersion < 1 {`, `if false {`).
		killedBy("./retention", "TestApplyRefusesCandidatesItCannotGuard"),
	ind("gc/owned-fence-planned", collectorGo, "the plan lists the fences of owned tasks",
		`if kv.ModRevision >= h || owned[string(kv.Key)] {`, `if kv.ModRevision >= h {`),
}

// The console's safety: the action token (csrf.go), the checks an action
// passes before the API is called (actions.go), whose API a caller reads
// through and for which tenants (console.go), the tenants of the live
// stream (live.go) and what a page offers and filters (pages.go). The
// browser tests run too (Chromium where installed).
const (
	consoleCSRFGo    = "console/csrf.go"
	consoleActionsGo = "console/actions.go"
	consoleGo        = "console/console.go"
	consoleLiveGo    = "console/live.go"
	consolePagesGo   = "console/pages.go"
	consolePkg       = "./console"
)

var indepConsole = []Mutation{
	// ---- console/csrf.go
	ind("console/token-empty-unnamed", consoleCSRFGo, "a missing token is refused as malformed, not as missing",
		"if token == \"\" {\n\t\treturn errNoToken\n\t}", ``).
		killedBy(consolePkg, "TestActionTokenIsBoundToTheCertificateAndExpires", "TestActionsFromAnotherOriginAreRefusedEvenWithTheToken"),
	ind("console/token-no-dot", consoleCSRFGo, "a token without its '.' goes on to the MAC check",
		"if !ok {\n\t\treturn errBadToken\n\t}", `_ = ok`).
		equivalent("without a '.' the MAC part is empty, and an empty MAC never equals a SHA-256 HMAC: refused as malformed all the same"),
	ind("console/token-expiry-parse-ignored", consoleCSRFGo, "an expiry that does not parse is taken as what the parser answers (0, or the largest int64 when out of range)",
		"e, err := strconv.ParseInt(exp, 10, 64)\n\tif err != nil {\n\t\treturn errBadToken\n\t}", `e, _ := strconv.ParseInt(exp, 10, 64)`).
		killedBy(consolePkg, "TestActionTokenIsBoundToTheCertificateAndExpires"),
	ind("console/token-mac-unchecked", consoleCSRFGo, "any MAC is accepted",
		`if err != nil || !hmac.Equal(got, c.mac(cert, e)) {`, `if _ = got; err != nil {`).
		killedBy(consolePkg, "TestActionTokenIsBoundToTheCertificateAndExpires", "TestActionsFromAnotherOriginAreRefusedEvenWithTheToken"),
	ind("console/token-mac-lenient", consoleCSRFGo, "a MAC is decoded leniently: a token altered in its last character's unused bits is accepted",
		`base64.RawURLEncoding.Strict().DecodeString(mac)`, `base64.RawURLEncoding.DecodeString(mac)`).
		killedBy(consolePkg, "TestActionTokenIsBoundToTheCertificateAndExpires"),
	ind("console/token-not-of-cert", consoleCSRFGo, "the MAC does not cover the certificate: one identity's token is good for another's",
		"h.Write(sum[:])\n", "_ = sum\n").
		killedBy(consolePkg, "TestActionTokenIsBoundToTheCertificateAndExpires", "TestActionsFromAnotherOriginAreRefusedEvenWithTheToken"),
	ind("console/token-not-of-expiry", consoleCSRFGo, "the MAC does not cover the expiry: a token's expiry can be moved",
		"h.Write(b[:])\n", ``).
		killedBy(consolePkg, "TestActionTokenIsBoundToTheCertificateAndExpires"),
	ind("console/token-keyless", consoleCSRFGo, "the MAC is made without the server's key: anyone can make a token",
		`h := hmac.New(sha256.New, c.key)`, `h := hmac.New(sha256.New, nil)`).
		killedBy(consolePkg, "TestActionTokenIsBoundToTheCertificateAndExpires"),
	ind("console/token-expiry-inclusive", consoleCSRFGo, "a token is refused at its expiry's own second",
		`if now.Unix() > e {`, `if now.Unix() >= e {`).
		killedBy(consolePkg, "TestActionTokenIsBoundToTheCertificateAndExpires"),
	ind("console/token-expiry-late", consoleCSRFGo, "a token is good a second past its expiry",
		`if now.Unix() > e {`, `if now.Unix() > e+1 {`).
		killedBy(consolePkg, "TestActionTokenIsBoundToTheCertificateAndExpires"),
	ind("console/token-never-expires", consoleCSRFGo, "a token never expires",
		`if now.Unix() > e {`, `if false {`).
		killedBy(consolePkg, "TestActionTokenIsBoundToTheCertificateAndExpires"),
	ind("console/token-validity-doubled", consoleCSRFGo, "a page's token is good for a day, not twelve hours",
		`const tokenValidity = 12 * time.Hour`, `const tokenValidity = 24 * time.Hour`).
		killedBy(consolePkg, "TestActionTokenIsGoodForTwelveHours"),
	ind("console/origin-unchecked", consoleCSRFGo, "the Origin header is not read",
		`o != "" && o != "https://"+r.Host {`, `false && o != "https://"+r.Host {`).
		killedBy(consolePkg, "TestActionsFromAnotherOriginAreRefusedEvenWithTheToken"),
	ind("console/origin-prefix", consoleCSRFGo, "an Origin the console's origin is a prefix of passes",
		`o != "" && o != "https://"+r.Host {`, `o != "" && !strings.HasPrefix(o, "https://"+r.Host) {`).
		killedBy(consolePkg, "TestActionsFromAnotherOriginAreRefusedEvenWithTheToken"),
	ind("console/origin-any-scheme", consoleCSRFGo, "an Origin of the console's host over another scheme (http) passes",
		`o != "" && o != "https://"+r.Host {`, `o != "" && !strings.HasSuffix(o, "://"+r.Host) {`).
		killedBy(consolePkg, "TestActionsFromAnotherOriginAreRefusedEvenWithTheToken"),
	ind("console/origin-required", consoleCSRFGo, "a request without an Origin header is refused (a client that is no browser, with the token)",
		`o != "" && o != "https://"+r.Host {`, `o != "https://"+r.Host {`).
		killedBy(consolePkg, "TestActionsFromAnotherOriginAreRefusedEvenWithTheToken"),
	ind("console/fetch-site-same-site", consoleCSRFGo, "Sec-Fetch-Site: same-site passes (a sibling host's page)",
		`case "cross-site", "same-site":`, `case "cross-site":`).
		killedBy(consolePkg, "TestActionsFromAnotherOriginAreRefusedEvenWithTheToken"),
	ind("console/fetch-site-cross-site", consoleCSRFGo, "Sec-Fetch-Site: cross-site passes",
		`case "cross-site", "same-site":`, `case "same-site":`).
		killedBy(consolePkg, "TestActionsFromAnotherOriginAreRefusedEvenWithTheToken"),

	// ---- console/actions.go
	ind("console/act-no-origin-check", consoleActionsGo, "an action does not ask where the browser says it comes from",
		`if err := sameOrigin(r); err != nil {`, `if err := sameOrigin(r); false && err != nil {`).
		killedBy(consolePkg, "TestActionsFromAnotherOriginAreRefusedEvenWithTheToken"),
	ind("console/act-no-token-check", consoleActionsGo, "an action is made without its token",
		`c.now()); err != nil {`, `c.now()); false && err != nil {`).
		killedBy(consolePkg, "TestActionsFromAnotherOriginAreRefusedEvenWithTheToken", "TestPostWithoutTheActionTokenIsRefused"),
	indN("console/act-token-after-call", consoleActionsGo, "the token is checked after the API's call: a cross-site form's decision is made, then refused",
		Edit{"\tif err := c.tokens.check(r.PostForm.Get(\"csrf\"), r.TLS.VerifiedChains[0][0], c.now()); err != nil {\n\t\tc.refuseForm(w, r, cl, action, err)\n\t\treturn\n\t}\n\tf := r.PostForm",
			"\tf := r.PostForm"},
		Edit{"\tif err != nil {\n\t\tc.lg.Info(\"console action refused\"",
			"\tif err := c.tokens.check(r.PostForm.Get(\"csrf\"), r.TLS.VerifiedChains[0][0], c.now()); err != nil {\n\t\tc.refuseForm(w, r, cl, action, err)\n\t\treturn\n\t}\n\tif err != nil {\n\t\tc.lg.Info(\"console action refused\""}).
		killedBy(consolePkg, "TestActionsFromAnotherOriginAreRefusedEvenWithTheToken", "TestPostWithoutTheActionTokenIsRefused"),
	ind("console/act-token-of-ca", consoleActionsGo, "the token is checked against the CA's certificate, not the browser's",
		`r.TLS.VerifiedChains[0][0], c.now()); err != nil {`, `r.TLS.VerifiedChains[0][len(r.TLS.VerifiedChains[0])-1], c.now()); err != nil {`).
		killedBy(consolePkg, "TestActionsFromAnotherOriginAreRefusedEvenWithTheToken"),
	ind("console/act-body-unbounded", consoleActionsGo, "an action's form is read whatever its size",
		`r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)`, ``).
		killedBy(consolePkg, "TestAnActionFormIsReadUpToItsBound"),
	ind("console/act-body-bound-over", consoleActionsGo, "an action's form is read a byte past its bound",
		`const maxFormBytes = 2 * ledger.MaxDetailBytes`, `const maxFormBytes = 2*ledger.MaxDetailBytes + 1`).
		killedBy(consolePkg, "TestAnActionFormIsReadUpToItsBound"),
	ind("console/act-body-bound-under", consoleActionsGo, "an action's form at its bound is refused (no room for evidence at the ledger's bound)",
		`const maxFormBytes = 2 * ledger.MaxDetailBytes`, `const maxFormBytes = ledger.MaxDetailBytes`).
		killedBy(consolePkg, "TestAnActionFormIsReadUpToItsBound"),
	ind("console/act-form-error-ignored", consoleActionsGo, "a form that could not be read goes on, as an empty one",
		`if err := r.ParseForm(); err != nil {`, `if err := r.ParseForm(); false && err != nil {`).
		killedBy(consolePkg, "TestAnActionFormIsReadUpToItsBound"),
	ind("console/act-unknown-done", consoleActionsGo, "an action the console does not have answers done",
		"\tdefault:\n\t\tc.fail(w, r, http.StatusNotFound", "\tcase \"\":\n\t\tc.fail(w, r, http.StatusNotFound").
		killedBy(consolePkg, "TestAnActionFormIsReadUpToItsBound"),
	ind("console/act-resolve-to-ignored", consoleActionsGo, "a resolution goes to SUPERSEDED whatever state the form names",
		`ledger.State(f.Get("to"))`, `ledger.Superseded`).
		killedBy(consolePkg, "TestAnActionFormIsReadUpToItsBound", "TestOperatorResolvesAManualReviewRecordFromThePage"),
	ind("console/act-provider-ids-dropped", consoleActionsGo, "a resolution's provider ids are not sent",
		`ev.ProviderIDs = append(ev.ProviderIDs, id)`, ``).
		killedBy(consolePkg, "TestOperatorResolvesAManualReviewRecordFromThePage"),
	ind("console/act-detail-unchecked", consoleActionsGo, "a detail that is not JSON is sent on",
		`if !json.Valid([]byte(d)) {`, `if false {`).
		killedBy(consolePkg, "TestOperatorResolvesAManualReviewRecordFromThePage"),

	// ---- console/console.go
	ind("console/whois-reads-as-worker", consoleGo, "every identity reads through the worker's service",
		"cl.api = c.apis[role]\n", "cl.api = c.apis[gateway.RoleWorker]\n").
		killedBy(consolePkg, "TestAnIdentitySeesOnlyItsTenantsOnEveryPage"),
	ind("console/whois-last-role", consoleGo, "an identity of several roles reads through the last of them, not the first",
		"cl.api = c.apis[role]\n\t\t\tbreak\n", "cl.api = c.apis[role]\n").
		equivalent("every role's service serves the same reads (records, tasks, ownership) under the same tenant rules: any role the identity has reads the same"),
	ind("console/whois-token-of-ca", consoleGo, "a page's token is made for the CA's certificate, not the browser's",
		`cl.token = c.tokens.make(r.TLS.VerifiedChains[0][0], c.now())`, `cl.token = c.tokens.make(r.TLS.VerifiedChains[0][len(r.TLS.VerifiedChains[0])-1], c.now())`).
		killedBy(consolePkg, "TestActionsFromAnotherOriginAreRefusedEvenWithTheToken"),
	ind("console/whois-unknown-goes-on", consoleGo, "a caller the gateway cannot identify gets the pages, with no identity",
		"\tif err != nil {\n\t\tc.fail(w, r, http.StatusUnauthorized", "\tif err != nil && r.TLS == nil {\n\t\tc.fail(w, r, http.StatusUnauthorized").
		killedBy(consolePkg, "TestACallerWithoutAKnownCertificateIsAskedWhoItIs"),
	ind("console/scopes-all-for-all", consoleGo, "every identity reads every tenant (\"\")",
		`if id.Serves(gateway.AllTenants) {`, `if true {`).
		killedBy(consolePkg, "TestAnIdentitySeesOnlyItsTenantsOnEveryPage"),
	ind("console/scopes-first-tenant", consoleGo, "an identity of several tenants reads its first only",
		`return append([]string(nil), id.Tenants...)`, `return id.Tenants[:1]`).
		killedBy(consolePkg, "TestAnIdentitySeesOnlyItsTenantsOnEveryPage"),
	ind("console/scopes-star-literal", consoleGo, "an identity of every tenant reads the tenant named \"*\"",
		`if id.Serves(gateway.AllTenants) {`, `if false {`).
		killedBy(consolePkg, "TestEffectsFiltersKeepExactlyTheMatchingRecords"),
	ind("console/no-frame-ancestors", consoleGo, "pages may be framed by another site (CSP without frame-ancestors, no X-Frame-Options)",
		"; frame-ancestors 'none'; base-uri 'none'\")\n\th.Set(\"X-Content-Type-Options\", \"nosniff\")", "; base-uri 'none'\")\n\th.Set(\"X-Content-Type-Options\", \"nosniff\")").
		killedBy(consolePkg, "TestPagesForbidFramingCachingAndOtherOrigins"),
	ind("console/no-frame-options", consoleGo, "no X-Frame-Options (browsers without CSP frame-ancestors frame the pages)",
		`h.Set("X-Frame-Options", "DENY")`, ``).
		killedBy(consolePkg, "TestPagesForbidFramingCachingAndOtherOrigins"),
	ind("console/pages-cached", consoleGo, "pages (an action token in them) may be cached",
		`h.Set("Cache-Control", "no-store")`, ``).
		killedBy(consolePkg, "TestPagesForbidFramingCachingAndOtherOrigins"),

	// ---- console/live.go
	ind("console/live-every-tenant", consoleLiveGo, "the live stream watches every tenant (\"\") for any identity",
		`ss := scopes(cl.id)`, `ss := []string{""}`).
		killedBy(consolePkg, "TestLiveStreamCarriesOnlyTheIdentitysTenants"),
	ind("console/live-first-tenant", consoleLiveGo, "the live stream of an identity of several tenants watches its first only",
		`ss := scopes(cl.id)`, `ss := scopes(cl.id)[:1]`).
		killedBy(consolePkg, "TestLiveStreamCarriesOnlyTheIdentitysTenants"),

	// ---- console/pages.go
	ind("console/page-approve-any-role", consolePagesGo, "an approve form for any identity",
		`v.CanApprove = cl.id.Has(gateway.RoleApprover) && `, `v.CanApprove = `).
		killedBy(consolePkg, "TestWorkerSeesNoApproveButtonAndAForgedApprovalIsRefused"),
	ind("console/page-reject-any-role", consolePagesGo, "a reject form for any identity",
		`v.CanReject = cl.id.Has(gateway.RoleApprover) && `, `v.CanReject = `).
		killedBy(consolePkg, "TestWorkerSeesNoApproveButtonAndAForgedApprovalIsRefused"),
	ind("console/page-resolve-any-role", consolePagesGo, "a resolve form for any identity",
		`v.CanResolve = cl.id.Has(gateway.RoleOperator) && `, `v.CanResolve = `).
		killedBy(consolePkg, "TestOperatorResolvesAManualReviewRecordFromThePage"),
	ind("console/page-approve-any-state", consolePagesGo, "an approve form whatever the record's state",
		`ledger.Allowed(rec.State, ledger.Authorized, ledger.StepAuthorize)`, `true`).
		killedBy(consolePkg, "TestOperatorResolvesAManualReviewRecordFromThePage"),
	ind("console/page-digest-unchecked", consolePagesGo, "the page says the parameters are their digest without recomputing it",
		`err == nil && d == rec.ParamsDigest {`, `err == nil && d != "" {`).
		killedBy(consolePkg, "TestTheOperationPageSaysWhenTheParametersAreNotTheirDigest"),
	ind("console/effects-kind-prefix", consolePagesGo, "the kind filter keeps the kinds it is a prefix of",
		`if f.Kind != "" && rec.Effect.Kind != f.Kind {`, `if f.Kind != "" && (len(rec.Effect.Kind) < len(f.Kind) || rec.Effect.Kind[:len(f.Kind)] != f.Kind) {`).
		killedBy(consolePkg, "TestEffectsFiltersKeepExactlyTheMatchingRecords"),
	ind("console/effects-task-without-tenant", consolePagesGo, "a task filter without its tenant is read across the identity's tenants",
		`if f.Task != "" && f.Tenant == "" {`, `if false {`).
		killedBy(consolePkg, "TestEffectsFiltersKeepExactlyTheMatchingRecords"),
	ind("console/effects-attention-unsorted", consolePagesGo, "MANUAL_REVIEW and UNKNOWN records are listed in task order, not UNKNOWN first",
		`return cmp.Or(cmp.Compare(slices.Index(needsHuman, a.State), slices.Index(needsHuman, b.State)), byTask(a, b))`, `return byTask(a, b)`).
		killedBy(consolePkg, "TestUnknownRecordIsAtTheTop"),
}
