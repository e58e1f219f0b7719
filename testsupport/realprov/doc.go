// Package realprov starts real providers on this machine for leasegate's
// reference adapters (adapters/...): their tests, `make test-providers`
// and `leasegate drill --providers real`. Every server listens on
// 127.0.0.1 only, keeps its data in a temporary directory, and is stopped
// by Close (in a test: t.Cleanup).
//
//   - PGPair: a PostgreSQL 15 primary and a streaming standby
//     (initdb; pg_basebackup -R), run as the postgres system user when the
//     caller is root (PostgreSQL refuses to run as root). Nodes can be
//     stopped, restarted, frozen (SIGSTOP) and promoted by hand, as an
//     operator would.
//   - DNSServer: BIND 9 named, authoritative for one zone that accepts
//     RFC 2136 updates signed with a TSIG key (written to a key file, as
//     an adapter reads it), and Nsupdate to edit it as an operator would.
//   - CutProxy: a TCP relay that cuts the connection right after it has
//     forwarded a chosen request (a promote sent, its answer lost).
//   - IdemServer: an HTTP service implementing the IETF httpapi
//     Idempotency-Key draft's answers, in Go (net/http/httptest).
//
// New* forms take a testing.TB and skip the test when the server's
// binaries are absent, with one line naming `make test-providers` (which
// installs them); Start* forms return errors, for programs.
//
// # Why BIND rather than Knot
//
// BIND 9 is Debian's default authoritative server (package bind9), it
// accepts a complete configuration in one file with `allow-update { key
// ...; }`, runs in the foreground with `named -g`, and its package family
// ships nsupdate (bind9-dnsutils), the tool an operator edits a dynamic
// zone with — the operator's edit mid-incident is one of the faults. Knot
// would do as well for the adapter (RFC 2136 is the same protocol); it
// needs knotc to load a configuration and its update ACLs are spelled
// differently, for nothing gained here.
//
// # Guarantees
//
// The servers are the Debian packages' own binaries, speaking their real
// protocols: streaming replication, pg_promote, timelines; DNS UPDATE
// with prerequisites, TSIG, SOA serials. Close stops every process it
// started and waits for it; ProcessesIn reports any process still running
// with its working directory under a harness directory (PostgreSQL and
// named both chdir into theirs), which the tests check is none. Servers
// are started with a parent-death signal (SIGKILL) after their switch to
// the postgres or bind user, so a test binary that is killed takes them
// with it (PostgreSQL's backends follow their postmaster).
//
// # Non-guarantees
//
// Ports are picked free and can be taken by another process before the
// server binds them: the start is retried with fresh ports. fsync is off
// (the data is thrown away). Nothing here is tuned or secured for
// production: the TSIG secret and the database password are generated per
// start and written to files under the harness directory.
package realprov
