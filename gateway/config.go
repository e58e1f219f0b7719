package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/leasegate/leasegate/coordinator"
)

// Role is what an identity may do: one service of the API each.
type Role string

// The roles, one per service.
const (
	RoleWorker   Role = "worker"   // WorkerService
	RoleApprover Role = "approver" // ApproverService
	RoleOperator Role = "operator" // OperatorService
)

// AllTenants in an identity's tenants lets it act on every tenant.
const AllTenants = "*"

// Identity is one caller the server knows: its certificate identity (a
// SPIFFE ID from the URI SAN, or the CN), its roles and its tenants. A
// worker's identity is its owner label, so it must be a label.
type Identity struct {
	ID      string   `json:"id"`
	Roles   []Role   `json:"roles"`
	Tenants []string `json:"tenants"`
	// Limits, if set, are this identity's own (a zero field: the
	// deployment's, Config.Limits / WithLimits).
	Limits *Limits `json:"limits,omitempty"`
}

// Has reports whether the identity has role r.
func (i Identity) Has(r Role) bool { return slices.Contains(i.Roles, r) }

// Serves reports whether the identity may act on tenant.
func (i Identity) Serves(tenant string) bool {
	return slices.Contains(i.Tenants, AllTenants) || slices.Contains(i.Tenants, tenant)
}

// Config is the server's configuration file (JSON): what workers never see.
type Config struct {
	// Listen is the address to serve on (--listen overrides it).
	Listen string `json:"listen"`
	// TLS is the server's certificate and the CA its clients' certificates
	// must chain to.
	TLS TLSFiles `json:"tls"`
	// Etcd is how the server reaches etcd, with its credentials.
	Etcd EtcdConfig `json:"etcd"`
	// SessionKeyFile holds the key (at least 32 bytes) that signs session
	// tokens; every replica must have the same one.
	SessionKeyFile string `json:"session_key_file"`
	// Identities maps certificate identities to roles and tenants.
	Identities []Identity `json:"identities"`
	// Adapters names the provider adapters to serve, by kind.
	Adapters []AdapterConfig `json:"adapters"`
	// PolicyFile, if set, holds the deployment's current policy
	// (PolicyFile: {"version": …, "rules": …}), reread when it changes
	// (every PolicyReloadInterval): proposals are recorded under it,
	// approvals given under it, and nothing approved under another is
	// dispatched.
	PolicyFile string `json:"policy_file,omitempty"`
	// Limits bound what each identity holds at once (sessions, grants,
	// watch streams), unless it names its own; a zero field is
	// DefaultLimits'.
	Limits Limits `json:"limits,omitempty"`
	// OTLPEndpoint, if set, exports traces there (OTLP over gRPC).
	OTLPEndpoint string `json:"otlp_endpoint,omitempty"`
}

// TLSFiles name PEM files.
type TLSFiles struct {
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	ClientCA string `json:"client_ca"`
}

// EtcdConfig is the etcd client of the server.
type EtcdConfig struct {
	Endpoints    []string `json:"endpoints"`
	Prefix       string   `json:"prefix,omitempty"`
	CACert       string   `json:"cacert,omitempty"`
	Cert         string   `json:"cert,omitempty"`
	Key          string   `json:"key,omitempty"`
	User         string   `json:"user,omitempty"`
	PasswordFile string   `json:"password_file,omitempty"`
}

// LoadConfig reads and checks a config file: everything that can be
// checked without reading another file or the network (Config.NewAdapters
// then builds the adapters, reading their files). An unknown field is an
// error, named with its adapter's index: a misspelt one would otherwise
// read as its zero value.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("gateway: config: %w", err)
	}
	// The adapters are decoded one by one (decodeAdapters), so that an
	// error names the adapter.
	var file struct {
		Config
		Adapters []json.RawMessage `json:"adapters"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return Config{}, fmt.Errorf("gateway: config %s: %w", path, err)
	}
	cfg := file.Config
	if cfg.Adapters, err = decodeAdapters(file.Adapters); err != nil {
		return Config{}, fmt.Errorf("gateway: config %s: %w", path, err)
	}
	if err := cfg.check(); err != nil {
		return Config{}, fmt.Errorf("gateway: config %s: %w", path, err)
	}
	return cfg, nil
}

func (c Config) check() error {
	if c.TLS.Cert == "" || c.TLS.Key == "" || c.TLS.ClientCA == "" {
		return fmt.Errorf("tls needs cert, key and client_ca: callers are known by their client certificates")
	}
	if c.SessionKeyFile == "" {
		return fmt.Errorf("session_key_file is required")
	}
	if len(c.Etcd.Endpoints) == 0 {
		return fmt.Errorf("etcd.endpoints is empty")
	}
	if err := checkIdentities(c.Identities); err != nil {
		return err
	}
	if err := c.Limits.check(); err != nil {
		return err
	}
	return checkAdapters(c.Adapters)
}

func checkIdentities(ids []Identity) error {
	seen := map[string]bool{}
	for _, id := range ids {
		if err := coordinator.CheckLabel("identity", id.ID); err != nil {
			return fmt.Errorf("identities: %w (a worker's identity is its owner label)", err)
		}
		if seen[id.ID] {
			return fmt.Errorf("identities: %q twice", id.ID)
		}
		seen[id.ID] = true
		if len(id.Roles) == 0 {
			return fmt.Errorf("identities: %q has no role", id.ID)
		}
		for _, r := range id.Roles {
			if r != RoleWorker && r != RoleApprover && r != RoleOperator {
				return fmt.Errorf("identities: %q has role %q; roles are worker, approver, operator", id.ID, r)
			}
		}
		if id.Has(RoleWorker) && id.Has(RoleApprover) {
			return fmt.Errorf("identities: %q is a worker and an approver: it could approve the effects it proposes; give the approver a certificate of its own", id.ID)
		}
		if id.Limits != nil {
			if err := id.Limits.check(); err != nil {
				return fmt.Errorf("identities: %q: %w", id.ID, err)
			}
		}
		if len(id.Tenants) == 0 {
			return fmt.Errorf("identities: %q has no tenant (%q for all)", id.ID, AllTenants)
		}
		for _, t := range id.Tenants {
			if t == AllTenants {
				continue
			}
			if err := coordinator.CheckLabel("tenant", t); err != nil {
				return fmt.Errorf("identities: %q: %w", id.ID, err)
			}
		}
	}
	return nil
}
