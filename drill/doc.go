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
// from the trial's seeded RNG (faults.go), the workers (naive.go,
// fenced.go, the graders' self-test designs in selftest.go), an operator,
// and the world's incident commander (commander.go): the approver, with its
// own identity at the gateway, deciding by written rules on the world's
// state — a design holds a worker identity only. Workers' ownership is real:
// each has an etcd session and claims the trial's task; the fenced workers'
// operations are real ledger records moved by fenced Txns, and the ledger
// reaches the providers only through the adapters (adapters.go). Graders
// (graders.go) read the trajectory (trajectory.go), and of it only the
// world's record: the ledger's journal as etcd stores it, the claims, the
// providers' logs and the commander's decisions — a design's own hold or
// note excuses nothing; cost.go measures the cost of safety, paired.go
// pairs it trial by trial, incident.go counts the seed's sequence; scenario.go replays the seed's incident; svg.go draws
// a trajectory.
//
// The fenced design is written once (fenced.go) and runs on a port of the
// world it is in: fenced_sim.go in simulated time, fenced_real.go in a
// worker process on real providers.
//
// WithRealProviders runs the trials on real servers instead (real.go,
// realtrial.go, realserve.go, realcommander.go, fenced_real.go,
// realnaive.go): a PostgreSQL primary and streaming standby as the
// topology and BIND as the traffic record (testsupport/realprov), one
// trial at a time in real time, the trajectory read from the servers' own
// records. The fenced workers are processes holding a certificate only:
// they reach the servers through `leasegate serve --config` with the
// reference adapters (adapters/pgpromote, adapters/dnsupdate), which alone
// holds their credentials; the world's commander decides in the drill's
// process, under its own certificate. The Guarantees
// below about determinism and virtual time are the simulated drill's; a
// real trial is a draw of the seed's faults, not a replayable function of
// it.
//
// WithWorker drills a user's worker instead (worker.go, worker_world.go,
// worker_proc.go, worker_commander.go): any program that speaks the
// gateway API, run as processes (a certificate each, a replacement after
// its heartbeat timeout) against the server of `leasegate serve` holding
// the trial's simulated providers, on real time (the world's clock 10x),
// with the world's incident commander acting through the gateway's
// approver API. Its graders read the world only: the providers' logs, the
// journal and the owner key in etcd. The contract the program must follow
// is in docs/drill.md; a breach is the drill's error (ErrWorkerContract).
// As with real providers, the Guarantees about determinism are the
// simulated drill's: a worker's trial is a draw of its seed's faults.
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
//   - The providers and their contracts are simulations (unless
//     WithRealProviders); time is virtual.
//     A simulated lease expiry revokes the real etcd lease (etcd deletes the
//     owner key as on expiry), at a time the drill chooses. See
//     docs/drill.md for what the drill does not prove.
//   - Workers pause or stop only at the windows the fault model names
//     (faults.go): in the promotion's and the traffic change's dispatch
//     (after the claim, after the gateway's last fence read, after the
//     provider accepted), inside Reconcile, before the commander's Resolve.
//     A stale call through the residual window (after the fence read) is
//     not a stale_epoch_dispatch violation: it is counted apart
//     (DesignReport.ResidualStaleCalls), and the other graders judge what
//     it did.
//   - The incident commander decides by fixed rules (the loss bound
//     re-read, the target the evidence names; traffic only toward the
//     writer; CONFIRMED or FAILED on the audit trail and the topology only;
//     a maintenance-page edit approved over once confirmed, the static
//     fallback left standing); without evidence a record stays in
//     MANUAL_REVIEW and traffic is held. On real providers it still runs
//     beside the built-in worker, by the same rules.
//   - A scenario (WithScenario) is deterministic whatever the seed; its
//     SVG (Trajectory.SVG) is the same bytes on every run.
//   - A killed simulated worker is unwound by a panic private to this
//     package (errKilled), recovered where its goroutine starts: it passes
//     through the ledger's Dispatch on purpose, so that the dispatch stays
//     claimed and unrecorded as after a real crash. It never reaches a
//     caller of this package.
package drill
