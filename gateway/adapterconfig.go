package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasegate/leasegate/adapters/dnsupdate"
	"github.com/leasegate/leasegate/adapters/httpidem"
	"github.com/leasegate/leasegate/adapters/pgpromote"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// AdapterConfig is one adapter the server serves. Type names it; the
// settings of a reference adapter are in the member named for its type
// (and only that one), credentials in files the settings name — never in
// the configuration's own text.
type AdapterConfig struct {
	// Type is pgpromote, dnsupdate, httpidem (the
	// reference adapters of adapters/), dev-topology, dev-dns (the
	// simulated providers of --dev, without settings).
	Type string `json:"type"`
	// Kind is the effect kind served (default: the type's: db.promote,
	// dns.upsert, http.idempotent; the dev types serve only theirs:
	// db.promote, dns.upsert). Each kind is served once.
	Kind string `json:"kind,omitempty"`

	PGPromote *PGPromoteConfig `json:"pgpromote,omitempty"`
	DNSUpdate *DNSUpdateConfig `json:"dnsupdate,omitempty"`
	HTTPIdem  *HTTPIdemConfig  `json:"httpidem,omitempty"`
}

// PGPromoteConfig is a pgpromote adapter: PostgreSQL promotion by
// pg_promote(), reconciled from the topology (adapters/pgpromote).
type PGPromoteConfig struct {
	// Nodes are the servers of the topology, at least two.
	Nodes []PGNodeConfig `json:"nodes"`
	// PasswordFile holds the role's password, one line; private (mode
	// 0600, or 0640 for the service's group).
	PasswordFile string `json:"password_file"`
	// PromoteWait is pg_promote's wait, whole seconds (default 60s).
	PromoteWait string `json:"promote_wait,omitempty"`
	// DialTimeout bounds each connection attempt (default 5s).
	DialTimeout string `json:"dial_timeout,omitempty"`
}

// PGNodeConfig is one PostgreSQL server.
type PGNodeConfig struct {
	// Name is the node's name in effects (the effect's target), a label.
	Name string `json:"name"`
	// Conn is a libpq keyword/value string or URL without a password:
	// host, port, dbname, user, sslmode (and sslrootcert, …).
	Conn string `json:"conn"`
}

// DNSUpdateConfig is a dnsupdate adapter: RFC 2136 UPDATE signed with TSIG,
// the approved RRset as its prerequisite (adapters/dnsupdate). The key is
// either tsig_key_name, tsig_algorithm and tsig_secret_file, or
// tsig_key_file (BIND's key clause, as tsig-keygen writes it).
type DNSUpdateConfig struct {
	// Server is the zone's primary, host:port.
	Server string `json:"server"`
	// Zone is the zone the adapter updates ("example.org.").
	Zone string `json:"zone"`
	// TSIGKeyName is the key's name as the server knows it.
	TSIGKeyName string `json:"tsig_key_name,omitempty"`
	// TSIGAlgorithm is hmac-sha256 (or -sha1, -sha224, -sha384, -sha512).
	TSIGAlgorithm string `json:"tsig_algorithm,omitempty"`
	// TSIGSecretFile holds the key's secret, base64 on one line; private.
	TSIGSecretFile string `json:"tsig_secret_file,omitempty"`
	// TSIGKeyFile is the whole key in BIND's syntax; private.
	TSIGKeyFile string `json:"tsig_key_file,omitempty"`
	// Timeout bounds each exchange with the server (default 5s).
	Timeout string `json:"timeout,omitempty"`
}

// HTTPIdemConfig is an httpidem adapter: POST with the operation id as
// Idempotency-Key to a user's own service (adapters/httpidem).
type HTTPIdemConfig struct {
	// URL is the base of the resources: an effect's target is a path
	// under it.
	URL string `json:"url"`
	// Lookup, if the service has one, is its lookup by key: a URL with
	// {key} where the key goes.
	Lookup string `json:"lookup,omitempty"`
	// KeyRetention is how long the service keeps a key (as it publishes
	// it); with it a retry under the same key is declared safe.
	KeyRetention string `json:"key_retention,omitempty"`
	// TokenFile holds a bearer token, one line; private.
	TokenFile string `json:"token_file,omitempty"`
	// CAFile verifies the service's certificate (default: system roots).
	CAFile string `json:"ca_file,omitempty"`
	// ClientCertFile and ClientKeyFile are a client certificate for a
	// service that wants mTLS; the key file private.
	ClientCertFile string `json:"client_cert_file,omitempty"`
	ClientKeyFile  string `json:"client_key_file,omitempty"`
	// Timeout bounds each request (default 10s).
	Timeout string `json:"timeout,omitempty"`
}

// adapterType is one type of AdapterConfig: its default kind, whether it
// takes settings, and how to build it (after checkAdapters passed).
type adapterType struct {
	kind     string
	settings func(AdapterConfig) any // the type's member; nil for the dev types
	build    func(ac AdapterConfig, b *builder) (ledger.Adapter, error)
}

// builder holds what the adapters of one configuration share: the dev
// types' one simulated world.
type builder struct{ dev *devprovider.Provider }

func (b *builder) devAdapter(kind string) ledger.Adapter {
	if b.dev == nil {
		b.dev = devprovider.New("db-1")
	}
	for _, a := range b.dev.Adapters() {
		if a.Kind() == kind {
			return a
		}
	}
	return nil
}

var adapterTypes = map[string]adapterType{
	"pgpromote": {kind: pgpromote.Kind, settings: func(ac AdapterConfig) any { return ac.PGPromote }, build: buildPGPromote},
	"dnsupdate": {kind: dnsupdate.Kind, settings: func(ac AdapterConfig) any { return ac.DNSUpdate }, build: buildDNSUpdate},
	"httpidem":  {kind: httpidem.Kind, settings: func(ac AdapterConfig) any { return ac.HTTPIdem }, build: buildHTTPIdem},
	"dev-topology": {kind: devprovider.KindPromote, build: func(ac AdapterConfig, b *builder) (ledger.Adapter, error) {
		return b.devAdapter(devprovider.KindPromote), nil
	}},
	"dev-dns": {kind: devprovider.KindDNS, build: func(ac AdapterConfig, b *builder) (ledger.Adapter, error) {
		return b.devAdapter(devprovider.KindDNS), nil
	}},
}

// typeNames are adapterTypes' names, the reference adapters first.
func typeNames() string {
	return "pgpromote, dnsupdate, httpidem, dev-topology, dev-dns"
}

// kindOf is the kind ac serves.
func kindOf(ac AdapterConfig) string {
	if ac.Kind != "" {
		return ac.Kind
	}
	return adapterTypes[ac.Type].kind
}

// decodeAdapters reads the adapters member strictly, each on its own, so
// that an unknown field is named with its adapter's index.
func decodeAdapters(raw []json.RawMessage) ([]AdapterConfig, error) {
	out := make([]AdapterConfig, 0, len(raw))
	for i, r := range raw {
		var ac AdapterConfig
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ac); err != nil {
			return nil, fmt.Errorf("adapters[%d]: %s", i, strings.TrimPrefix(err.Error(), "json: "))
		}
		out = append(out, ac)
	}
	return out, nil
}

// checkAdapters checks what can be checked without reading a file or the
// network: known types, each with its own settings and no other's, kinds
// that are labels and served once, durations that parse.
func checkAdapters(acs []AdapterConfig) error {
	served := map[string]int{}
	for i, ac := range acs {
		at := fmt.Sprintf("adapters[%d]", i)
		t, ok := adapterTypes[ac.Type]
		if !ok {
			return fmt.Errorf("%s.type %q: one of %s", at, ac.Type, typeNames())
		}
		members := map[string]bool{"pgpromote": ac.PGPromote != nil, "dnsupdate": ac.DNSUpdate != nil, "httpidem": ac.HTTPIdem != nil}
		for m, given := range members {
			if given && m != ac.Type {
				return fmt.Errorf("%s.%s: an adapter of type %s takes no %s settings", at, m, ac.Type, m)
			}
		}
		if t.settings != nil && !members[ac.Type] {
			return fmt.Errorf("%s.%s: an adapter of type %s needs its settings there", at, ac.Type, ac.Type)
		}
		kind := kindOf(ac)
		if t.settings == nil && kind != t.kind {
			return fmt.Errorf("%s.kind %q: type %s serves kind %s only", at, ac.Kind, ac.Type, t.kind)
		}
		if err := coordinator.CheckLabel("kind", kind); err != nil {
			return fmt.Errorf("%s.kind: %w", at, err)
		}
		if j, dup := served[kind]; dup {
			return fmt.Errorf("%s.kind: effect kind %q served twice (adapters[%d] serves it): one adapter per kind", at, kind, j)
		}
		served[kind] = i
		for field, d := range durations(ac) {
			if _, err := duration(d); err != nil {
				return fmt.Errorf("%s.%s.%s: %w", at, ac.Type, field, err)
			}
		}
	}
	return nil
}

// durations are ac's duration settings by field name.
func durations(ac AdapterConfig) map[string]string {
	switch {
	case ac.PGPromote != nil:
		return map[string]string{"promote_wait": ac.PGPromote.PromoteWait, "dial_timeout": ac.PGPromote.DialTimeout}
	case ac.DNSUpdate != nil:
		return map[string]string{"timeout": ac.DNSUpdate.Timeout}
	case ac.HTTPIdem != nil:
		return map[string]string{"key_retention": ac.HTTPIdem.KeyRetention, "timeout": ac.HTTPIdem.Timeout}
	}
	return nil
}

// duration parses a duration setting ("" is unset: 0).
func duration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want e.g. \"5s\" or \"1m30s\"", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("duration %q must be positive", s)
	}
	return d, nil
}

// NewAdapters builds the configuration's adapters, each checked by its
// constructor now — files read, hosts resolved — so that a bad address,
// key or credential path is invalid input when the server starts, not at
// the first dispatch. Its error is invalid_input naming the field at fault
// (adapters[1].dnsupdate.tsig_secret_file). Whether a provider answers is
// not checked here: see Server.probeAdapters.
func (c Config) NewAdapters() ([]ledger.Adapter, error) {
	if err := checkAdapters(c.Adapters); err != nil {
		return nil, store.NewError(store.InvalidInput, "gateway config", "", "", fmt.Sprintf("%v", err), nil)
	}
	b := &builder{}
	out := make([]ledger.Adapter, 0, len(c.Adapters))
	for i, ac := range c.Adapters {
		a, err := adapterTypes[ac.Type].build(ac, b)
		if err != nil {
			return nil, store.NewError(store.InvalidInput, "gateway config", "", "", fmt.Sprintf("%s", fieldOf(fmt.Sprintf("adapters[%d].%s", i, ac.Type), err)), nil)
		}
		out = append(out, a)
	}
	return out, nil
}

// fieldOf is a constructor's error as "<at>.<field>: <detail>", the field
// the adapter named (adapters/internal/config.FieldError).
func fieldOf(at string, err error) string {
	detail := err.Error()
	var ce *coordinator.Error
	if errors.As(err, &ce) && ce.Detail != "" {
		detail = ce.Detail
	}
	var f interface{ Field() string }
	if errors.As(err, &f) && f.Field() != "" {
		return at + "." + f.Field() + ": " + detail
	}
	return at + ": " + detail
}

func withKind[O any](ac AdapterConfig, def string, with func(string) O) []O {
	if ac.Kind == "" || ac.Kind == def {
		return nil
	}
	return []O{with(ac.Kind)}
}

func buildPGPromote(ac AdapterConfig, _ *builder) (ledger.Adapter, error) {
	s := ac.PGPromote
	nodes := make([]pgpromote.Node, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		nodes = append(nodes, pgpromote.Node{Name: n.Name, ConnString: n.Conn})
	}
	opts := withKind(ac, pgpromote.Kind, pgpromote.WithKind)
	if d, _ := duration(s.PromoteWait); d > 0 {
		opts = append(opts, pgpromote.WithPromoteWait(d))
	}
	if d, _ := duration(s.DialTimeout); d > 0 {
		opts = append(opts, pgpromote.WithDialTimeout(d))
	}
	return pgpromote.New(nodes, s.PasswordFile, opts...)
}

func buildDNSUpdate(ac AdapterConfig, _ *builder) (ledger.Adapter, error) {
	s := ac.DNSUpdate
	opts := withKind(ac, dnsupdate.Kind, dnsupdate.WithKind)
	if d, _ := duration(s.Timeout); d > 0 {
		opts = append(opts, dnsupdate.WithTimeout(d))
	}
	split := s.TSIGKeyName != "" || s.TSIGAlgorithm != "" || s.TSIGSecretFile != ""
	switch {
	case split && s.TSIGKeyFile != "":
		return nil, fieldError("tsig_key_file", "give tsig_key_file or tsig_key_name, tsig_algorithm and tsig_secret_file, not both")
	case s.TSIGKeyFile != "":
		return dnsupdate.New(s.Server, s.Zone, s.TSIGKeyFile, opts...)
	case !split:
		return nil, fieldError("tsig_secret_file", "no TSIG key: give tsig_key_name, tsig_algorithm and tsig_secret_file (or tsig_key_file)")
	}
	return dnsupdate.NewWithKey(s.Server, s.Zone, dnsupdate.Key{Name: s.TSIGKeyName, Algorithm: s.TSIGAlgorithm, SecretFile: s.TSIGSecretFile}, opts...)
}

func buildHTTPIdem(ac AdapterConfig, _ *builder) (ledger.Adapter, error) {
	s := ac.HTTPIdem
	opts := withKind(ac, httpidem.Kind, httpidem.WithKind)
	if s.Lookup != "" {
		opts = append(opts, httpidem.WithLookup(s.Lookup))
	}
	if d, _ := duration(s.KeyRetention); d > 0 {
		opts = append(opts, httpidem.WithKeyRetention(d))
	}
	if s.TokenFile != "" {
		opts = append(opts, httpidem.WithTokenFile(s.TokenFile))
	}
	if s.CAFile != "" {
		opts = append(opts, httpidem.WithCAFile(s.CAFile))
	}
	if s.ClientCertFile != "" || s.ClientKeyFile != "" {
		opts = append(opts, httpidem.WithClientCertificate(s.ClientCertFile, s.ClientKeyFile))
	}
	if d, _ := duration(s.Timeout); d > 0 {
		opts = append(opts, httpidem.WithTimeout(d))
	}
	return httpidem.New(s.URL, opts...)
}

// settingError is a setting the gateway itself finds wrong, named as the
// adapters name theirs.
type settingError struct{ field, msg string }

func fieldError(field, msg string) error { return &settingError{field, msg} }
func (e *settingError) Error() string    { return e.msg }
func (e *settingError) Field() string    { return e.field }
