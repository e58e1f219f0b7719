package gateway

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"connectrpc.com/connect"

	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// CertIdentity is the identity a certificate names, or why it names none.
// A certificate with a SPIFFE ID (a URI SAN of scheme spiffe) is that ID:
// it must carry exactly one URI SAN, a well-formed SPIFFE ID
// (spiffe://<trust-domain>/<path>: no user, port, query or fragment), as
// an X.509-SVID does. A certificate without one is its subject CN, which
// must not itself be in SPIFFE form: the two namespaces stay apart, so that
// a certificate whose CN a CA took from a request cannot pass for a
// workload's SPIFFE ID. Other URI SANs (not spiffe) are not identities.
func CertIdentity(cert *x509.Certificate) (string, error) {
	var spiffe []*url.URL
	for _, u := range cert.URIs {
		if strings.EqualFold(u.Scheme, "spiffe") {
			spiffe = append(spiffe, u)
		}
	}
	switch {
	case len(spiffe) > 0 && len(cert.URIs) > 1:
		return "", fmt.Errorf("the certificate has %d URI SANs, %d of them SPIFFE IDs: an X.509-SVID carries exactly one", len(cert.URIs), len(spiffe))
	case len(spiffe) == 1:
		u := spiffe[0]
		if u.Host == "" || u.Opaque != "" || u.User != nil || u.Port() != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
			return "", fmt.Errorf("URI SAN %q is not a SPIFFE ID (spiffe://<trust-domain>/<path>)", u)
		}
		return u.String(), nil
	case cert.Subject.CommonName == "":
		return "", fmt.Errorf("the certificate has neither a SPIFFE ID nor a CN")
	case len(cert.Subject.CommonName) >= len("spiffe:") && strings.EqualFold(cert.Subject.CommonName[:len("spiffe:")], "spiffe:"):
		return "", fmt.Errorf("the certificate has no SPIFFE ID but CN %q: a SPIFFE ID is taken from the URI SAN only", cert.Subject.CommonName)
	}
	return cert.Subject.CommonName, nil
}

type callerKey struct{}

// callerOf is the authenticated caller of a call (set by authenticate).
func callerOf(ctx context.Context) Identity {
	id, _ := ctx.Value(callerKey{}).(Identity)
	return id
}

// roleOfPath is the role a procedure needs, by its service; "" for paths
// that are not leasegate's API (health, reflection, metrics).
func roleOfPath(path string) Role {
	switch {
	case strings.HasPrefix(path, "/"+leasegatev1connect.WorkerServiceName+"/"):
		return RoleWorker
	case strings.HasPrefix(path, "/"+leasegatev1connect.ApproverServiceName+"/"):
		return RoleApprover
	case strings.HasPrefix(path, "/"+leasegatev1connect.OperatorServiceName+"/"):
		return RoleOperator
	}
	return ""
}

// Identify is the identity r's verified client certificate names under the
// server's configuration, as every call of the API knows its caller, or why
// it has none (unauthenticated): no verified certificate, one that names no
// identity, or an identity the configuration does not list. What the
// identity may do is still the API's to decide, call by call: the console
// (package console) shows pages by it and acts only through the API.
func (s *Server) Identify(r *http.Request) (Identity, error) {
	op := strings.TrimPrefix(r.URL.Path, "/")
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return Identity{}, refuseCaller(store.NewError(coordinator.Unauthenticated, op, "", "", "no client certificate: the gateway knows its callers by their certificates", nil))
	}
	name, err := CertIdentity(r.TLS.VerifiedChains[0][0])
	if err != nil {
		return Identity{}, refuseCaller(store.NewError(coordinator.Unauthenticated, op, "", "", fmt.Sprintf("the client certificate names no identity: %v", err), nil))
	}
	id, ok := s.identities[name]
	if !ok {
		return Identity{}, refuseCaller(store.NewError(coordinator.Unauthenticated, op, "", "", fmt.Sprintf("identity %q is not in the server's configuration", name), nil))
	}
	return id, nil
}

// authenticate puts the caller's identity in the request's context, or
// refuses the call before anything is read: no verified client certificate
// (or one the config does not name) is unauthenticated, a known identity
// without the service's role permission_denied.
func (s *Server) authenticate(next http.Handler) http.Handler {
	errw := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		role := roleOfPath(r.URL.Path)
		if role == "" {
			next.ServeHTTP(w, r)
			return
		}
		op := strings.TrimPrefix(r.URL.Path, "/")
		id, err := s.Identify(r)
		if err != nil {
			s.refuseCall(errw, w, r, op, err)
			return
		}
		if !id.Has(role) {
			s.refuseCall(errw, w, r, op, refuseCaller(store.NewError(coordinator.PermissionDenied, op, "", "", fmt.Sprintf("identity %q is not %s %s (its roles: %v)", id.ID, article(role), role, id.Roles), nil)))
			return
		}
		if r.ContentLength > int64(s.opts.maxMessageBytes) {
			s.refuseCall(errw, w, r, op, oversized(op, "", r.ContentLength, s.opts.maxMessageBytes))
			return
		}
		s.limitBody(r, op)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, id)))
	})
}

// refuseCall answers a call refused before its handler ran.
func (s *Server) refuseCall(errw *connect.ErrorWriter, w http.ResponseWriter, r *http.Request, op string, err error) {
	s.metrics.request(op, CodeOf(coordinator.DispositionOf(err)))
	_ = errw.Write(w, r, ConnectError(err))
}

// tenantAllowed refuses a call on a tenant the caller may not act on.
func tenantAllowed(ctx context.Context, op, tenant, task string) error {
	id := callerOf(ctx)
	if tenant != "" {
		if err := coordinator.CheckLabel("tenant", tenant); err != nil {
			return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	if tenant == "" {
		if id.Serves(AllTenants) {
			return nil
		}
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("tenant is required (identity %q serves %v only)", id.ID, id.Tenants), nil)
	}
	if !id.Serves(tenant) {
		return refuseCaller(store.NewError(coordinator.PermissionDenied, op, tenant, task, fmt.Sprintf("identity %q may not act on tenant %q", id.ID, tenant), nil))
	}
	return nil
}

// ownGrant refuses a grant that does not name the caller as its owner: a
// worker acts only with grants its identity owns.
func ownGrant(ctx context.Context, op string, g coordinator.Grant) error {
	if err := tenantAllowed(ctx, op, g.Tenant, g.Task); err != nil {
		return err
	}
	if id := callerOf(ctx); g.Owner != id.ID {
		return refuseCaller(store.NewError(coordinator.PermissionDenied, op, g.Tenant, g.Task, fmt.Sprintf("the grant names owner %q; the caller is %q", g.Owner, id.ID), nil))
	}
	return nil
}

// article is the indefinite article of a role's name.
func article(r Role) string {
	if r == RoleApprover || r == RoleOperator {
		return "an"
	}
	return "a"
}
