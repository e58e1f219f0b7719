// Package coordinator keeps task ownership in etcd: a realm, a keyspace, one
// lease per Session, and for every task an owner key (on the owner's lease)
// and a fence key published together by one claim Txn. The epoch of a grant
// is that Txn's revision.
//
// A Grant is a plain value — evidence to be checked, never authority by
// itself. Every use of it (Renew, Release, fencedtxn.Commit, a caller's Txn
// built with Guard) compares, inside one etcd Txn: the realm, that the fence
// has not moved since the grant's claim, that the owner key is the one that
// claim wrote, for the same owner, on the same lease.
//
// # Guarantees
//
//   - A grant whose lease etcd has expired or revoked is refused
//     (expired_owner) even if nobody has claimed the task since.
//   - A grant older than the task's current one is refused (stale_owner)
//     from the instant the newer claim Txn applied, before the new owner
//     writes anything; so is a grant naming the current epoch with another
//     owner or lease.
//   - Release deletes the owner key only while the grant is current: a
//     stale release never removes a newer owner.
//   - A claim retried after its answer was lost returns the same grant.
//   - RotateRealm refuses every outstanding grant at once.
//   - A request that never reached etcd is authority_unavailable (hold,
//     nothing written); one that may have reached it is outcome_unknown;
//     neither is ever reported as a refusal. This needs DialOptions on the
//     etcd client; without them every failed write is outcome_unknown.
//   - Bad input is invalid_input before any I/O, and so is a request etcd
//     can never accept (over WithMaxTxnOps or WithMaxRequestBytes, a key
//     written twice); etcd's own refusal of such a request is
//     invalid_input too. etcd's auth refusal is permission_denied, its
//     NOSPACE alarm no_space: neither is a hold that passes by waiting.
//   - Every request is bounded: with no deadline on the caller's context,
//     WithRequestTimeout (default 10s) applies, quorum or not.
//   - Reads never write and are never outcome_unknown: Open, Owner, List,
//     Leases, Lease and Session.Grants only read; a read that fails is
//     authority_unavailable.
//
// # Non-guarantees
//
//   - Expiry is etcd's: a lease ends when the leader's lessor revokes it,
//     which is asynchronous and can lag the nominal TTL (and leases are
//     extended across leader changes). Until the owner key is deleted the
//     old grant still passes; no new claim can pass either. The session's
//     local deadline makes a live owner stop early, but a paused process is
//     stopped only by the Txn.
//   - Nothing here stops a process from acting outside etcd. An external
//     effect is fenced only if it goes through a Txn with Guard, or through
//     the effect ledger.
//   - Restoring etcd from a backup restores old epochs under the same
//     realm; rotate the realm after a restore. CheckOrigin (realm show)
//     warns when the keyspace looks restored since its realm was minted,
//     but can miss a restore (docs/design.md, section 12).
//   - Client clocks decide nothing, and are trusted for nothing but the
//     session's own conservative deadline.
package coordinator
