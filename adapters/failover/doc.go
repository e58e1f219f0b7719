// Package failover has no code of its own: its test runs seed 003's
// failover on real providers through the real ledger — a PostgreSQL
// primary impaired, its streaming standby promoted (adapters/pgpromote),
// then traffic pointed at the new writer by RFC 2136 update
// (adapters/dnsupdate) once the topology shows it — under faults that are
// real there: the promote's connection cut after send, the standby
// stopped at dispatch, the standby frozen (SIGSTOP) with the promote
// written to it, the task passing to another worker while the promote is
// in flight, an operator's nsupdate mid-incident, each once (make
// test-providers runs it; so does make test where the servers are
// installed). It checks the trajectory from the servers' own records: one promote statement in the
// standby's log (carrying its operation id and epoch), no confirmation
// without evidence, the final traffic at the final writer, an operator's
// edit never overwritten.
//
// `leasegate drill --providers real` (drill/real*.go, make drill-real) runs
// the drill's seeded trials and graders on the same servers; this test
// keeps one case per fault, including two the drill does not draw (the
// standby frozen with the promote sent, a takeover with the answer in
// hand), with checks of its own.
package failover
