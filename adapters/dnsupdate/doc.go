// Package dnsupdate is a reference ledger adapter (ledger.Adapter) for DNS
// by RFC 2136 dynamic update, signed with TSIG, against the zone's primary
// authoritative server (BIND 9, Knot, PowerDNS, Windows DNS: anything that
// takes UPDATE). It is the example of a provider with a provider-side
// precondition and no change ids; docs/ledger.md, "Providers without
// idempotency keys or lookups", walks through it.
//
//	ad, err := dnsupdate.New("10.0.0.53:53", "example.test.", "/etc/leasegate/update.key")
//	l, err := ledger.New(c, ledger.WithAdapters(ad))
//	effect, err := ad.Effect("checkout.example.test.", "A", "10.0.0.2", 60, "failover-v3")
//
// The key file is BIND's syntax, as tsig-keygen writes it and nsupdate -k
// reads it; the zone must allow updates and transfers with that key (the
// transfer for the IXFR by which Apply and Observe find the update's
// change), and should keep its history as increments
// (BIND sends a whole zone instead when the increments are larger than
// max-ixfr-ratio of it, which a tiny zone hits):
//
//	key "leasegate-update" { algorithm hmac-sha256; secret "…"; };
//	options { max-ixfr-ratio unlimited; };
//	zone "example.test" { type primary; file "…";
//		allow-update { key "leasegate-update"; }; allow-transfer { key "leasegate-update"; }; };
//
// # The provider's contract, and how the adapter meets it
//
//   - Precondition: the RRset (name, type) and the zone's SOA serial, from
//     the authoritative server (the AA bit is required); the digest is the
//     RRset's values only (the serial moves with any edit of the zone).
//   - Apply: one UPDATE whose prerequisite section is the approved RRset,
//     value dependent (RFC 2136 2.4.2; "RRset does not exist", 2.4.3, when
//     there was none), and whose update section replaces the RRset. The
//     server applies the update only if the prerequisite holds, both in one
//     step: an operator's edit between the ledger's revalidation and the
//     call makes the server answer NXRRSET — a definite refusal with the
//     record's current value as evidence, not an overwrite. An UPDATE
//     answered NOERROR cites its own change, the step of the zone's
//     history (IXFR from the approved serial) Observe would find, as
//     "<zone> serial <from>-><to>" — not the serial read after the answer,
//     which an operator's edit in between makes theirs. Without that step
//     in the history no serial is cited; the answer is the evidence.
//   - Observe: the zone's own history first — an IXFR (RFC 1995, signed)
//     from the approved SOA serial returns every change since, in order,
//     from the server's journal. A change that deleted exactly the approved
//     RRset and added the wanted record is this upsert: Applied, citing the
//     serials, even when someone changed the record after it. No such
//     change: NotApplied. Where the server keeps no history from that
//     serial (it answers with the whole zone), the RRset decides: the
//     wanted value Applied, the approved one NotApplied, a third value
//     Inconclusive — someone else wrote the record, and its value cannot
//     say whether this update landed before them.
//   - Contract: Conditional; no Lookup; not RetrySafe (a retry's
//     prerequisite refuses it once the first attempt applied, but an
//     operator who put the approved value back would let it apply again).
//
// # How this differs from Route 53
//
// An authoritative server's UPDATE has no change id: nothing can be
// polled by id, and nothing records who sent which update, so Observe
// reads the zone's history and the record itself. Route 53's ChangeResourceRecordSets returns a change id
// (ChangeInfo.Id) with status PENDING; a Route 53 adapter returns that id
// as Evidence with an ambiguous error when the change is not yet INSYNC,
// the ledger stores it on the record, and Observe(rec) polls
// GetChange(rec.Evidence.ProviderIDs[0]): PENDING is Pending, INSYNC is
// Applied. Route 53 has a precondition too — a change batch's DELETE of
// the exact current record fails the whole batch when the record differs,
// which is the same compare-and-set as this prerequisite — but no
// idempotency key for the batch (CallerReference exists only for hosted
// zones and health checks), so it is not RetrySafe either.
//
// # Guarantees
//
//   - A server that refused the update (a failed prerequisite, a bad key,
//     not authoritative) applied nothing: FAILED with its answer. A lost
//     answer after the UPDATE was written is ambiguous, never guessed.
//   - The check of the approved world and the write are one step at the
//     server.
//   - Configuration is checked by New (or NewWithKey: the key's name and
//     algorithm given, only the secret in a file): host:port that
//     resolves, a domain name, a readable key file, private to its owner
//     and group, with a supported algorithm and a secret of at least 16
//     bytes (read again at every update; never logged). An error names
//     the setting as `leasegate serve`'s configuration does.
//   - Probe asks the zone's SOA signed with the key: the server answers
//     with authority and accepts the key, or an error says which failed.
//
// # Non-guarantees
//
//   - Applied means the zone's history (or, without one, the record) shows
//     the change, not that this update sent it: an operator's identical
//     edit reads the same.
//   - An authoritative primary is not the world's resolvers: propagation
//     to secondaries (NOTIFY, IXFR) and resolver caches (the TTL) follow
//     later. Check resolution from the clients' side before declaring the
//     traffic moved, as seed 003 says.
package dnsupdate
