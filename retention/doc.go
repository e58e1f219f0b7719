// Package retention keeps a leasegate keyspace bounded: it collects
// operation records past a retention window, resolved effect-ledger records
// (CONFIRMED, FAILED, SUPERSEDED, REJECTED) last written before the window
// together with their journal entries, fences of tasks that are neither
// owned nor written within the window, and its own old clock marks.
// A service schedules Collector.Run (say hourly); `leasegate gc` is the same
// code from a shell, dry-run by default.
//
// The retention window is the time during which a retry of a committed
// operation gets its original receipt back (historical_retry). Past it, the
// operation record may be gone, and a retry is refused by the state-version
// compare (version_conflict): it is never applied twice. The default window
// is DefaultWindow (7 days).
//
// etcd keeps no wall-clock time, so the collector keeps its own clock in the
// keyspace: every Run first writes a mark <p>/retention/marks/<revision>
// holding the time read just after the mark was applied. A record whose
// ModRevision is below that of a mark at least one window old was written at
// least one window ago. So the first Run collects nothing, and a record is
// kept at least one window and at most one window plus the interval between
// runs.
//
// # Guarantees
//
//   - Every deletion is one guarded Txn that deletes only what was read:
//     the key's ModRevision is unchanged (for a ledger record: no
//     transition since the plan read it resolved; its journal entries go in
//     the same Txn). An operation record is deleted
//     only while the task's state key is at or past the version the
//     operation committed (the compare that refuses a late retry), and a
//     fence only while the task has no owner key. Apply re-checks these in
//     the Txn and never trusts a Plan.
//   - A stale grant whose fence was collected is still refused
//     (stale_owner): its epoch matches neither the absent fence nor a
//     fence a later claim writes, whose epoch is a newer revision.
//   - State keys are never collected: their Version is what refuses a
//     retry whose record is gone.
//   - Plan (the dry run) writes nothing.
//
// # Non-guarantees
//
//   - Past the window an operation id can be reused: a *different* intent
//     under a collected operation id, decided against the current version,
//     commits as a new operation instead of being refused with
//     operation_conflict. Keep operation ids unique for longer than the
//     window.
//   - The window is measured with the clocks of the hosts that run the
//     collector. A clock running ahead shortens the window (a retry gets
//     version_conflict sooner); it never makes a deletion unsafe.
//   - Past the window a ledger operation id is free again: a Propose under
//     it makes a new record, which the ledger can dispatch. The ledger's
//     idempotency, like the commit's, lasts as long as the window; keep it
//     longer than any provider's Contract.Retention and than any retry.
//   - The audit trail of a collected ledger record is gone with it: export
//     the journal first (leasegate ops show) if it must outlive the window.
//   - etcd's own history is not compacted here: run etcd with
//     auto-compaction, or compact, for the DB size to stay bounded.
package retention
