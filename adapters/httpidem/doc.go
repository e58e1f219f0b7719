// Package httpidem is a reference ledger adapter (ledger.Adapter) for a
// user's own HTTP service that takes the Idempotency-Key header (the IETF
// httpapi draft "The Idempotency-Key HTTP Header Field", and Stripe's
// convention). It is the example of a provider that does take part: a
// key, a published key expiry, optionally a lookup by key, and ETags.
//
//	ad, err := httpidem.New("https://traffic.internal/v1/records",
//		httpidem.WithKeyRetention(24*time.Hour),                                     // the service's key expiry
//		httpidem.WithLookup("https://traffic.internal/v1/changes?idempotency_key={key}"),
//		httpidem.WithTokenFile("/etc/leasegate/traffic.token"))
//	effect, err := ad.Effect("checkout", map[string]string{"value": "db-b"}, "failover-v3")
//
// # The provider's contract, and how the adapter meets it
//
//   - Precondition: GET of the resource; the digest is its ETag (or
//     "absent" on 404).
//   - Apply: POST of the effect's body to the resource with
//     Idempotency-Key: the operation id, Fencing-Epoch: the dispatch's
//     epoch (a service that keeps the highest epoch per resource refuses an
//     older one: the fence reaches the provider), and If-Match: the approved
//     ETag (If-None-Match: * for an absent one), so the service checks the
//     approved world in the same step as the write. 2xx is applied (a
//     replay of the first answer included); 412, 422 (the key with another
//     payload), a stale epoch and other 4xx are refusals; 409 "in progress",
//     408, 5xx and a connection lost after the request was written are
//     ambiguous; a request never written is a refusal.
//   - Observe: with WithLookup, the service's first answer under the key
//     (2xx Applied; another status, or 404 never received, NotApplied; 409
//     Pending). Without it, the resource: the body's fields there, Applied;
//     the approved ETag still, NotApplied; else Inconclusive.
//   - Contract: Conditional always; Lookup with WithLookup; RetrySafe for
//     WithKeyRetention. A POST the lookup shows never received is
//     dispatched again under the same key, which the service deduplicates.
//
// # Guarantees
//
//   - The operation id is the key on every attempt, by every owner; a
//     retry is replayed by the service, never applied twice, within the
//     key retention the service published.
//   - Configuration is checked by New: an http(s) base URL whose host
//     resolves, a lookup template with {key}, a readable one-line token
//     file private to its owner and group (read at every request; never
//     logged), a CA file and a client certificate that load (the pair read
//     again at every TLS handshake). An error names the setting as
//     `leasegate serve`'s configuration does.
//   - Probe GETs the base URL with the token: 401, 403 and 5xx fail.
//
// # Non-guarantees
//
//   - The adapter trusts the service to keep the draft's promises; a
//     service that forgets keys sooner than it says breaks RetrySafe.
//   - Without a lookup, "applied" is read from the resource's state and
//     cannot tell this POST from another client's identical one.
package httpidem
