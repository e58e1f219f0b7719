// Package bench measures leasegate side by side with bare etcd and etcd's
// own primitives, in interleaved rounds on the same etcd so that machine
// drift cancels out of the ratios (Run), and the takeover latency of a
// waiting contender against a polling one and concurrency.Election
// (Takeover), and one session holding many grants (Scale). `leasegate bench`
// is its command line. Each states its plan and expected length first and
// reports a Progress per finished step; a run whose context ends early
// returns what it measured with ErrInterrupted.
//
// Variants (each worker on keys of its own, one shared client, reused
// sessions):
//
//	put                 a plain etcd Put: an unprotected write
//	bare-commit         one etcd Txn of exactly fencedtxn.Commit's shape: the same compares, puts and Else reads
//	commit              fencedtxn.Commit: the protected write
//	bare-commit-control bare-commit on another task, run only when asked: its ratio to bare-commit is the run's noise floor
//	mutex               concurrency.Mutex Lock + Unlock on a reused session
//	election            concurrency.Election Campaign + Resign on a reused session
//	bare-claim-release  the claim Txn and the release Txn of leasegate, sent bare
//	bare-claim-release-nofence  the same without the fence put (and its compare): what the claim's second key costs; not a safe protocol
//	claim-release       Session.Claim + Coordinator.Release
//	ledger-dispatch     one Dispatch of an AUTHORIZED record (claim, revalidate, apply, confirm) with a provider that applies at once; the record is proposed and authorized untimed
//	ledger-lifecycle    one effect through the ledger: Propose, Authorize, Dispatch
//	gateway-commit      commit through the gateway: client.Commit over loopback TLS to a gateway (leasegate serve's server, started in the process with an etcd client of its own), whose handler makes the same fencedtxn.Commit
//	gateway-dispatch    ledger-dispatch through the gateway: client.Dispatch of a record proposed by the worker and authorized by an approver identity through the gateway, untimed
//	http-floor          one bare POST over loopback TLS to a net/http server whose handler does nothing: the least any hop built on net/http (connect) costs
//	grpc-floor          one bare unary call over loopback TLS to a grpc-go server whose handler does nothing: the same floor for grpc-go
//
// An unpaired run reports each variant's process CPU per operation, and
// from it Bounds: cpu(commit) / (cpu(commit) + cpu(floor)) is the highest
// gateway-commit / commit any hop at least as costly as the floor could
// reach where the CPUs bound the run.
//
// The gateway variants' workers each have a certificate (an identity) of
// their own, so a client and connections of their own, as worker processes
// have; the gateway's provider is ledger-dispatch's.
//
// Guarantees: every figure comes from operations that succeeded against a
// real etcd (an embedded member with fsync on unless told otherwise, or the
// cluster at the endpoints given); failed operations are counted, never
// timed. Ratios are taken per round, between cells run back to back, and
// reported with their minimum over the rounds.
//
// Non-guarantees: absolute figures depend on the machine and on whatever
// else runs on it; the embedded member shares the process (and its CPUs)
// with the client. Latencies are client-side wall times.
package bench
