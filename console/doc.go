// Package console is leasegate's web console: what an incident commander,
// an approver and an operator look at during a failover, served by
// leasegate serve at /console/ on the gateway's own port (docs/console.md).
//
// It shows the tasks with their owners, epochs, leases and time left, live
// (the gateway's ownership watch, pushed to the page as server-sent events);
// the sessions, the realm and its origin; the effects that need a human
// (UNKNOWN and MANUAL_REVIEW) above the rest; and one operation: its record,
// and its journal drawn as a timeline beside the task's owners. An approver
// approves or rejects the exact record it read; an operator resolves a
// MANUAL_REVIEW record.
//
// # Guarantees
//
//   - The console knows its caller only by the client certificate its
//     browser presented on the gateway's TLS port (gateway.Server.Identify):
//     no password, no cookie, no token in a URL.
//   - Every read and every action is a call of the gateway's API, made
//     in-process through the API's own handler with the browser's verified
//     certificate (inproc.go): a page never shows, and an action never does,
//     more than the same certificate could through the API. The console holds
//     no rule of its own about who may do what; a button hidden from an
//     identity is a courtesy, the API's refusal is the rule.
//   - A state-changing request (POST) carries a token bound to the
//     presenting certificate (csrf.go), checked before the API is called: a
//     cross-site form that the browser sends with the certificate (ambient
//     authority) is refused, whatever its Origin says.
//   - The live list holds one watch stream of the gateway per open page, the
//     API's WatchOwnership: nothing polls etcd.
//
// # Non-guarantees
//
//   - What a page shows was true when it was read; the live list follows
//     ownership, the other parts are as of the page's load (reload).
//   - The ownership lane of an operation's timeline is what the journal
//     shows (each transition names the epoch and owner that made it) and the
//     current owner: etcd keeps no history of owners, so an epoch that wrote
//     nothing to this operation's journal is not drawn.
package console
