// Package ledger is the effect ledger: records of effects on external
// providers (a database promotion, a DNS change, a payment capture), each
// with one stable operation id, moved through one state machine by fenced
// etcd Txns, and dispatched to its provider only through one gateway.
//
//	PROPOSED → AUTHORIZED → DISPATCHING → CONFIRMED
//	   ↘ REJECTED   ↘ REJECTED     ↘ FAILED (provider's definite no, with evidence)
//	                ↘ PROPOSED     ↘ SUPERSEDED (revalidated after the claim; nothing sent)
//	                  (approval    ↘ AUTHORIZED (the world could not be observed; nothing sent)
//	                   lapsed)     ↘ UNKNOWN → CONFIRMED | SUPERSEDED | MANUAL_REVIEW
//	                                         → AUTHORIZED (retry, same id, where the contract allows)
//	MANUAL_REVIEW → CONFIRMED | FAILED | SUPERSEDED | REJECTED (an operator, Resolve)
//
// The table of transitions is in transition.go, and nowhere else. Every
// transition is one Txn: the grant's fence compares (coordinator.Guard),
// the record's ModRevision (CreateRevision 0 to create it), the new record
// and one journal entry (from, to, epoch, owner, reason, evidence).
//
// # Guarantees
//
//   - A transition the table does not hold is refused (illegal_transition)
//     and writes nothing; so is one by a grant that is not current
//     (stale_owner, expired_owner, authority_generation_mismatch).
//   - A stale grant is refused by Dispatch before any adapter is called:
//     the fence stops a stale worker from starting an effect through the
//     gateway. Of concurrent dispatches of one operation, at most one
//     claims it and reaches the adapter.
//   - One intent keeps one operation id: Propose is idempotent on it, a
//     retry (by this owner or the next) dispatches the same id, and
//     Reconcile never mints a new one.
//   - Nothing reaches CONFIRMED or FAILED without the provider's evidence;
//     an answer that never came back is UNKNOWN, a state, until the
//     provider's own authority (Observe) settles it or an operator does.
//   - The world is revalidated at dispatch: an approval binds exact
//     parameter and precondition digests, and a changed world makes the
//     record SUPERSEDED without dispatching. An approval older than its
//     validity, or given under a policy no longer current, is not
//     dispatched: the record is PROPOSED again.
//   - A provider's answer in hand is never dropped: one received after the
//     dispatch's grant stopped being current is kept on the record, and the
//     next owner's Reconcile settles from it without asking again.
//   - Stored data that cannot be decoded is corrupt_record, to reads as to
//     calls that act; an operation that is not recorded is invalid_input.
//   - The journal of an operation is in transition order; every entry
//     records the revision it was written at.
//
// # Non-guarantees
//
//   - No exactly-once effect at providers that do not take part: a
//     provider that does not deduplicate by the operation id, or whose
//     Observe cannot tell, leaves the record in MANUAL_REVIEW rather than
//     retrying.
//   - The fence cannot cancel an effect already sent: a newer epoch stops
//     new dispatches, not one in flight. That dispatch's outcome becomes
//     UNKNOWN and is reconciled.
//   - The fence binds only code that goes through the gateway. A worker
//     holding the provider's credentials can bypass it.
//   - Journal and dispatch times are the writers' clocks: informative, and
//     used only to measure a provider's idempotency retention.
//   - The error of a call is about the ledger's own requests; the effect's
//     outcome is the returned record's State.
package ledger
