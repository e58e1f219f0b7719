package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/digest"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// PolicyReloadInterval is how often leasegate serve rereads its
// configuration's policy_file for a change.
const PolicyReloadInterval = time.Second

// PolicyFile is the policy file's content (JSON): a version people name,
// and the rules themselves, any JSON value (what the policy checks is the
// deployment's; the gateway binds proposals and approvals to exactly these
// rules).
type PolicyFile struct {
	Version string          `json:"version"`
	Rules   json.RawMessage `json:"rules"`
}

// Policy is the deployment's current policy, read from a file: its ID is
// the version and the first 16 hex digits of the rules' digest
// ("v7@3f2a9c0d1e2b4a5c"), so that a change to the rules under the same
// version is another policy too. Every proposal is recorded under the
// policy current when it is made, every approval is given under the
// current one, and a dispatch of a record approved under a policy that is
// no longer current is not sent: the record goes back to PROPOSED for a
// new approval (ledger.WithPolicy). Watch rereads the file when it
// changes.
type Policy struct {
	path string
	lg   *zap.Logger

	mu  sync.Mutex
	id  string
	raw []byte // the file as last read
}

// LoadPolicy reads the policy file at path.
func LoadPolicy(path string) (*Policy, error) {
	p := &Policy{path: path, lg: zap.NewNop()}
	if _, err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// PolicyID is the ID of a policy file's content: its version, "@", and the
// first 16 hex digits of the digest of its canonical rules.
func PolicyID(f PolicyFile) (string, error) {
	if err := coordinator.CheckLabel("policy version", f.Version); err != nil {
		return "", err
	}
	if len(f.Version) > 60 {
		return "", fmt.Errorf("policy version is %d bytes; at most 60", len(f.Version))
	}
	if len(bytes.TrimSpace(f.Rules)) == 0 {
		return "", fmt.Errorf("policy has no rules")
	}
	rules, err := ledger.CanonicalParams(f.Rules)
	if err != nil {
		return "", fmt.Errorf("policy rules: %w", err)
	}
	return f.Version + "@" + digest.Of("leasegate-policy-v1", f.Version, string(rules))[:16], nil
}

// Reload rereads the file, and reports whether the policy changed. A file
// that cannot be read or is not a policy keeps the current policy (the
// error says why).
func (p *Policy) Reload() (bool, error) {
	raw, err := os.ReadFile(p.path)
	if err != nil {
		return false, fmt.Errorf("gateway: policy file: %w", err)
	}
	p.mu.Lock()
	same := p.id != "" && bytes.Equal(raw, p.raw)
	p.mu.Unlock()
	if same {
		return false, nil
	}
	var f PolicyFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return false, fmt.Errorf("gateway: policy file %s: %w", p.path, err)
	}
	id, err := PolicyID(f)
	if err != nil {
		return false, fmt.Errorf("gateway: policy file %s: %w", p.path, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := id != p.id
	if changed && p.id != "" {
		p.lg.Info("policy changed", zap.String("from", p.id), zap.String("to", id), zap.String("file", p.path))
	}
	p.id, p.raw = id, raw
	return changed, nil
}

// Current is the current policy's ID.
func (p *Policy) Current() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.id
}

// Watch rereads the file every interval until ctx ends (the file's
// change, seen by its content), logging a file that no longer reads as a
// policy (the current policy stays).
func (p *Policy) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := p.Reload(); err != nil {
				p.lg.Error("policy file not reloaded; the current policy stays", zap.String("policy", p.Current()), zap.Error(err))
			}
		}
	}
}

// WithPolicy makes p the deployment's current policy: Propose records it
// (an effect naming another policy is refused, one naming none gets it),
// Authorize gives approvals under it, and Dispatch sends nothing approved
// under a policy that is no longer it (the record goes back to PROPOSED).
// Without it, the policy is the one each effect names, which never
// changes.
func WithPolicy(p *Policy) Option {
	return func(o *options) error {
		if p == nil {
			return fmt.Errorf("nil policy")
		}
		o.policy = p
		return nil
	}
}

// proposedUnder is e with the server's current policy: an effect naming
// none gets it; one naming another is refused, nothing written.
func (s *Server) proposedUnder(op string, e ledger.Effect) (ledger.Effect, error) {
	if s.opts.policy == nil {
		return e, nil
	}
	cur := s.opts.policy.Current()
	switch e.Policy {
	case "":
		e.Policy = cur
	case cur:
	default:
		return e, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("effect.policy is %q; the server's current policy is %q: leave it empty to propose under the current one", e.Policy, cur), nil)
	}
	return e, nil
}
