// Package temporal joins Temporal's durable execution to leasegate's fence
// and effect ledger, through the gateway (leasegate serve) and its Go
// client: an activity worker built on it holds a client certificate and no
// provider credential.
//
// Import it under another name beside the SDK's own temporal package:
//
//	lgtemporal "github.com/leasegate/leasegate/temporal"
//
// # The mapping
//
//   - Workflow id + step name → operation id (OperationID, in workflow
//     code). Deterministic and replay-safe: a pure function of the two,
//     never of the attempt number, the run id, the worker or the clock, so a
//     retried attempt, a new worker build and a worker restart all carry the
//     same id. The workflow id also names the leasegate task (TaskOf) every
//     effect of the workflow is scoped to.
//   - Activity attempt → grant and epoch (Begin). Each attempt opens its own
//     session through the gateway and claims the workflow's task; while an
//     older attempt's lease lives the claim is busy and the attempt waits.
//     Its grant's epoch is newer than every earlier attempt's, so an older
//     attempt's next effect is refused at the gateway with stale_owner.
//   - Heartbeat → renewal (Attempt.Heartbeat): one call records Temporal's
//     heartbeat and renews the session's lease. Nothing else renews it: no
//     keepalive goroutine outlives the attempt's own progress, so an attempt
//     that stops heartbeating (paused, partitioned, wedged) stops holding its
//     lease at its TTL.
//   - Heartbeat timeout → the next attempt's acquire. Temporal schedules the
//     next attempt; its Begin claims once the stalled attempt's lease is gone.
//   - Activity retry → Reconcile (Attempt.Resume): a retried attempt reads
//     the operation's record and resumes it — CONFIRMED returns the
//     receipt, DISPATCHING or UNKNOWN reconciles, AUTHORIZED dispatches under
//     the new epoch, PROPOSED waits for the approver, anything else stops for
//     review (a non-retryable error, ErrorTypeStopped).
//   - One effect per activity (ExecuteEffect): each effect is its own
//     workflow-scheduled activity, so an attempt Temporal gave up on cannot
//     advance to the next effect by itself.
//   - Approvals: the effect activity waits on the record. The approver
//     authorizes the exact digests through the gateway's ApproverService
//     with its own certificate; the workflow and its workers never approve,
//     and no Temporal signal can stand in for an approval.
//
// # Choosing the heartbeat timeout and the TTL
//
// Keep TTL ≤ heartbeat timeout, and heartbeat at least every TTL/3 (the
// effect activity does so itself while it waits or a call is in flight).
// With TTL ≤ heartbeat timeout the stalled attempt's lease is gone when
// Temporal starts the next attempt, which then claims at once. With TTL
// greater, the next attempt waits up to TTL − heartbeat timeout for the
// lease (safe, slower). With TTL much smaller than the heartbeat timeout a
// renewal hiccup loses the lease while Temporal still counts the attempt
// alive: its next call is refused (expired_owner), it fails with a
// retryable error, and Temporal retries at once. Safety depends on neither:
// the gateway checks the epoch on every effect.
//
// # Guarantees
//
//   - One operation id per (workflow id, step): every attempt proposes,
//     dispatches and reconciles the same record, and the provider sees the
//     same idempotency key.
//   - A superseded attempt's next effect is refused at the gateway
//     (stale_owner), before any provider is called; an attempt whose lease
//     lapsed is refused too (expired_owner), locally or at the gateway.
//   - A retried attempt never mints a new intent: it resumes the record.
//   - An outcome the gateway could not learn is UNKNOWN until the provider's
//     own authority settles it (Reconcile) or an operator resolves it.
//
// # Non-guarantees
//
//   - It cannot cancel a call already sent: a newer epoch stops new
//     dispatches only. A dispatch the gateway claimed finishes and is
//     recorded whatever happens to the attempt that asked for it.
//   - Temporal's history is not the provider's truth: an activity's recorded
//     result says what the attempt reported, not what the provider did. The
//     ledger's record, settled from the provider, is the truth this package
//     acts on.
//   - A worker that holds provider credentials of its own bypasses every
//     fence. Give activity workers none.
//   - Temporal may still deliver a late completion of a superseded attempt;
//     it rejects it (the attempt is no longer current), and nothing here
//     depends on that.
//
// # Versions
//
// This module pins go.temporal.io/sdk v1.38.0, go.temporal.io/api v1.62.2
// and github.com/nexus-rpc/sdk-go v0.5.1 because its tests run a real
// Temporal server in-process (go.temporal.io/server/temporaltest, SQLite)
// at go.temporal.io/server v1.30.4: a newer SDK requires nexus v0.6.0, with
// which that server does not build, and newer servers need a newer Go than
// the project's. It is a module of its own so that leasegate's core module
// and its users do not inherit Temporal's dependency tree.
package temporal
