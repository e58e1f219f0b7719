// Package fencedtxn performs protected writes: Commit puts a task's business
// state and the record of the operation in the same etcd Txn that checks the
// writer's grant (coordinator.Guard), that the operation is not yet
// recorded, and that the state is at the version the intent was decided
// against (coordinator.Guard fences Txns of a caller's own). Get reads the
// protected state back: value, version, and the operation, epoch and
// revision of the last commit.
//
// # Guarantees
//
//   - A commit applies only while its grant is the task's current, live
//     grant; the check and the write are one Txn, so nothing can change
//     ownership between them. Its linearization point is the Txn's revision.
//   - An operation applies at most once per task. Retrying it (same
//     tenant, task, operation id, value and expected version) returns the
//     original receipt as historical_retry, to the current owner only —
//     also to a later owner recovering it, since operation identity never
//     includes the epoch. The same operation id with another payload is
//     operation_conflict.
//   - The payload digest is SHA-256 over length-prefixed fields, so two
//     different intents never share one.
//   - Scope mismatch and bad input are refused before any I/O.
//   - A state or operation record that does not decode (written outside
//     this package) is corrupt_record, to Get as to Commit; nothing is
//     written.
//
// # Non-guarantees
//
//   - A commit whose answer was lost is outcome_unknown; retry the same
//     intent to learn. Nothing here retries for you.
//   - Effects outside etcd (a provider call) are not made atomic with the
//     commit; they need the effect ledger.
//   - The state version counts commits of this package; a caller writing
//     the state key by other means breaks it.
package fencedtxn
