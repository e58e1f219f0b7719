// Package store is the etcd plumbing every leasegate package runs on: one
// keyspace as leasegate reaches it (Store), with ordinary methods, ctx
// first.
//
//   - Txn (txn.go) runs one Txn: checked against etcd's limits before any
//     I/O, sent, and its failure classified (transport.go: Do and
//     classifySendError) as authority_unavailable, outcome_unknown,
//     expired_owner, ... — the coordinator's Txns, fencedtxn's commits, the
//     ledger's transitions and retention's deletions alike.
//   - Guard, GuardReads and CheckGuard (guard.go) are what a fenced Txn
//     compares and how its failure is named; Guarded caches them per
//     grant; DescribeHolder completes a refusal's holder.
//   - Keys (keys.go) is the whole key layout, records.go the values stored
//     under it; RenewLease (lease.go) renews a lease once.
//   - Disposition, Class, Error, Grant and Ownership are the vocabulary
//     those need. Package coordinator names them with type aliases, so
//     they are its users' types too.
//
// Package coordinator wraps a Store (coordinator.New builds it); the
// packages built on coordinator — fencedtxn, ledger, retention, the
// gateway, the CLI, the drill, the benchmarks — reach a coordinator's
// Store through Of. store imports no leasegate package.
package store
