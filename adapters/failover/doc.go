// Package failover has no code of its own: its test runs seed 003's
// failover on real providers through the real ledger — a PostgreSQL
// primary impaired, its streaming standby promoted (adapters/pgpromote),
// then traffic pointed at the new writer by RFC 2136 update
// (adapters/dnsupdate) once the topology shows it — under faults that are
// real there: the promote's connection cut after send, the standby
// stopped at dispatch, the standby frozen (SIGSTOP) with the promote
// written to it, the task passing to another worker while the promote is
// in flight, an operator's nsupdate mid-incident. `make drill-real` runs
// it in rounds. It checks the
// trajectory from the servers' own records: one promote statement in the
// standby's log (carrying its operation id and epoch), no confirmation
// without evidence, the final traffic at the final writer, an operator's
// edit never overwritten.
//
// It is not `leasegate drill --providers real`: trials are the named
// faults, not a seeded draw, and the checks are this test's, not the
// drill's graders.
package failover
