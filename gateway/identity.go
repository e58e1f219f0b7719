package gateway

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/coordinator"
)

// CertIdentity is the identity a certificate names: its first URI SAN in
// SPIFFE form (spiffe://<trust-domain>/<path>), else its subject CN.
func CertIdentity(cert *x509.Certificate) string {
	for _, u := range cert.URIs {
		if u.Scheme == "spiffe" && u.Host != "" {
			return u.String()
		}
	}
	return cert.Subject.CommonName
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
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			s.refuseCall(errw, w, r, op, refuseCaller(&coordinator.Error{Disposition: coordinator.Unauthenticated, Op: op,
				Detail: "no client certificate: the gateway knows its callers by their certificates"}))
			return
		}
		name := CertIdentity(r.TLS.VerifiedChains[0][0])
		id, ok := s.identities[name]
		if !ok {
			s.refuseCall(errw, w, r, op, refuseCaller(&coordinator.Error{Disposition: coordinator.Unauthenticated, Op: op,
				Detail: fmt.Sprintf("identity %q is not in the server's configuration", name)}))
			return
		}
		if !id.Has(role) {
			s.refuseCall(errw, w, r, op, refuseCaller(&coordinator.Error{Disposition: coordinator.PermissionDenied, Op: op,
				Detail: fmt.Sprintf("identity %q is not a %s (its roles: %v)", name, role, id.Roles)}))
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
			return coordinator.Invalid(op, "%v", err)
		}
	}
	if tenant == "" {
		if id.Serves(AllTenants) {
			return nil
		}
		return coordinator.Invalid(op, "tenant is required (identity %q serves %v only)", id.ID, id.Tenants)
	}
	if !id.Serves(tenant) {
		return refuseCaller(&coordinator.Error{Disposition: coordinator.PermissionDenied, Op: op, Tenant: tenant, Task: task,
			Detail: fmt.Sprintf("identity %q may not act on tenant %q", id.ID, tenant)})
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
		return refuseCaller(&coordinator.Error{Disposition: coordinator.PermissionDenied, Op: op, Tenant: g.Tenant, Task: g.Task,
			Detail: fmt.Sprintf("the grant names owner %q; the caller is %q", g.Owner, id.ID)})
	}
	return nil
}
