// Package pgpromote is a reference ledger adapter (ledger.Adapter) for a
// provider without idempotency keys or lookups: it promotes a PostgreSQL
// streaming standby with pg_promote(), and reconciles an ambiguous answer
// from the topology each server reports about itself.
//
// A worked example for users writing their own adapter; docs/ledger.md,
// "Providers without idempotency keys or lookups", walks through it.
//
//	ad, err := pgpromote.New([]pgpromote.Node{
//		{Name: "db-a", ConnString: "host=10.0.0.1 port=5432 dbname=postgres user=leasegate"},
//		{Name: "db-b", ConnString: "host=10.0.0.2 port=5432 dbname=postgres user=leasegate"},
//	}, "/etc/leasegate/pg.password") // checked now: bad input is invalid_input here
//	l, err := ledger.New(c, ledger.WithAdapters(ad))
//	effect, err := ad.Effect("db-b", "5s", "failover-v3")
//
// The role needs pg_monitor (to read pg_control_checkpoint and
// pg_control_system) and EXECUTE on pg_promote(boolean, integer):
//
//	CREATE ROLE leasegate LOGIN PASSWORD '…' IN ROLE pg_monitor;
//	GRANT EXECUTE ON FUNCTION pg_promote(boolean, integer) TO leasegate;
//
// # The provider's contract, and how the adapter meets it
//
//   - Precondition: every node's pg_is_in_recovery(), timeline and system
//     identifier, read from the node itself; digest "db-a=writer/tl1/…;
//     db-b=standby/tl1/…". A node that does not answer is "unreachable" in
//     the digest (that is the world of a failover); the target must answer.
//   - Apply: `SELECT pg_promote(true, wait) … WHERE pg_is_in_recovery() AND
//     timeline = approved` on the target, in one statement: the target's
//     part of the approved world is checked by the server in the same step
//     as the promotion. PostgreSQL takes no idempotency key: the operation
//     id and epoch travel as the connection's application_name, for the
//     server's log only.
//   - Observe: the topology again. Out of recovery on a timeline past the
//     approved one: Applied, the topology as evidence. Still in recovery
//     within the promote wait of the dispatch: Pending. After it, or after
//     a restart of the node (which discards a pending promote signal):
//     NotApplied.
//   - Contract: the zero Contract. No Lookup (PostgreSQL cannot say whether
//     it ever received a promote), no RetrySafe (nothing deduplicates a
//     second one), not Conditional (the standby cannot check the other
//     nodes). So an ambiguous promote the topology shows applied is
//     CONFIRMED; one it does not show goes to MANUAL_REVIEW, never to a
//     second promote by the ledger.
//
// # Guarantees
//
//   - A promote the server refused (not in recovery, off the approved
//     timeline, no privilege) or never received (no connection) is a
//     definite refusal with the topology as evidence; a lost answer after
//     the statement was written is ambiguous, never guessed.
//   - Configuration is checked by New: at least two nodes, label names,
//     connection strings that parse, name a resolvable host and carry no
//     password, a readable one-line password file private to its owner and
//     group (read again at every connection, so a rotated file takes
//     effect; never logged). An error names the setting as `leasegate
//     serve`'s configuration does (nodes[1].conn, password_file).
//   - Probe reads every node's topology as the role: an error names each
//     node that did not answer (or refused the password).
//
// # Non-guarantees
//
//   - "Applied" means the target is the writer on a newer timeline, not
//     that this call promoted it: an operator's promotion in between reads
//     the same. The topology cannot tell them apart; the server log
//     (application_name) can, for a person.
//   - The gap between the ledger's revalidation and the call is closed for
//     the target's own state only. An old primary that comes back as a
//     writer in that gap is not refused by the standby: fence it
//     (STONITH, a firewall) before promoting, as any PostgreSQL failover
//     must.
//   - NotApplied after the promote wait is an inference from
//     PostgreSQL's behaviour (a promote signal acts within seconds), not
//     the server's word.
package pgpromote
