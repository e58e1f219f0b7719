// Package drill is leasegate's failover drill: the seed-000 stale-owner
// fixtures on real etcd, then a regional failover (promote a database
// writer, then point traffic at it) run trial after trial under injected
// faults, once with the incident's naive design and once fenced through
// the effect ledger, each trial graded on its whole trajectory.
//
// Run runs it on an etcd cluster reached by a client, under a prefix of
// its own (Cleanup deletes it); `leasegate drill` starts an embedded etcd
// when given no endpoints. Each trial is a small simulated world (sim.go):
// a virtual clock, the database topology and DNS providers with their own
// authority and logs (providers.go), the audit trail, the fault plan drawn
// from the trial's seeded RNG (faults.go), and two or three actors — the
// workers (naive.go, fenced.go) and an operator. Workers' ownership is real:
// each has an etcd session and claims the trial's task; the fenced workers'
// operations are real ledger records moved by fenced Txns, and the ledger
// reaches the providers only through the adapters (adapters.go). Graders
// (graders.go) read the trajectory (trajectory.go): the ledger's journal as
// etcd stores it, the claims, and the providers' logs.
//
// # Guarantees
//
//   - A trial is a function of the seed and its number: actors run one at
//     a time, in an order fixed by the virtual clock, so the same calls
//     reach etcd and the providers in the same order; Trajectory.Render
//     with canonical set is equal across runs (epochs named by order).
//   - Both designs face the same fault plan for the same seed and trial.
//   - A fixture passes only if it observes its expected disposition and a
//     refusal leaves the keyspace byte-for-byte unchanged.
//   - The report is not a pass when the drill could not run: Run returns an
//     error (etcd unreachable, a trial that failed on etcd) and no report.
//   - Nothing is written outside the run's prefix.
//
// # Non-guarantees
//
//   - The providers and their contracts are simulations; time is virtual.
//     A simulated lease expiry revokes the real etcd lease (etcd deletes the
//     owner key as on expiry), at a time the drill chooses. See
//     docs/drill.md for what the drill does not prove.
//   - Workers pause or stop only at the points the fault model names: after
//     a provider applied a promotion, or after the promotion's dispatch was
//     claimed and before the call left. The gateway reads the grant under
//     its fence once more as the call leaves (sendable); a pause between
//     that read and the call itself is not exercised.
//   - The incident commander resolves a MANUAL_REVIEW promotion only on
//     evidence (an audit event under the operation's id and the topology
//     showing the target); without it the record stays there.
//   - A killed simulated worker is unwound by a panic private to this
//     package (errKilled), recovered where its goroutine starts: it passes
//     through the ledger's Dispatch on purpose, so that the dispatch stays
//     claimed and unrecorded as after a real crash. It never reaches a
//     caller of this package.
package drill
