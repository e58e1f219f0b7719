package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// maxFormBytes bounds an action's form: a reason and evidence.
const maxFormBytes = 2 * ledger.MaxDetailBytes

// act is an approver's or operator's decision on one record: approve,
// reject or resolve. It is refused before anything is called unless the
// request carries the action token of the presenting certificate; then it
// is the API's call, whose refusal (the identity's role or tenant, a
// record changed since the page was read) the page shows.
func (c *Console) act(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.whoIs(w, r)
	if !ok {
		return
	}
	tenant, task, operation, action := r.PathValue("tenant"), r.PathValue("task"), r.PathValue("operation"), r.PathValue("action")
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, http.StatusBadRequest, cl, "Not done", store.NewError(store.InvalidInput, action, "", "", fmt.Sprintf("the form: %v", err), nil))
		return
	}
	if err := sameOrigin(r); err != nil {
		c.refuseForm(w, r, cl, action, err)
		return
	}
	if err := c.tokens.check(r.PostForm.Get("csrf"), r.TLS.VerifiedChains[0][0], c.now()); err != nil {
		c.refuseForm(w, r, cl, action, err)
		return
	}
	f := r.PostForm
	var err error
	switch action {
	case "approve":
		_, err = cl.api.Authorize(cl.ctx, tenant, task, operation, ledger.Approval{
			ParamsDigest: f.Get("params_digest"), PreconditionDigest: f.Get("precondition_digest"),
			Policy: f.Get("policy"), Note: f.Get("note")})
	case "reject":
		_, err = cl.api.Reject(cl.ctx, tenant, task, operation, f.Get("reason"))
	case "resolve":
		var ev ledger.Evidence
		ev, err = evidenceOf(f)
		if err == nil {
			_, err = cl.api.Resolve(cl.ctx, tenant, task, operation, ledger.State(f.Get("to")), ev, f.Get("why"))
		}
	default:
		c.fail(w, r, http.StatusNotFound, cl, "Not done", store.NewError(store.InvalidInput, "console", "", "", fmt.Sprintf("no action %q (approve, reject, resolve)", action), nil))
		return
	}
	if err != nil {
		c.lg.Info("console action refused", zap.String("identity", cl.id.ID), zap.String("action", action), zap.String("tenant", tenant),
			zap.String("task", task), zap.String("operation", operation), zap.String("disposition", string(coordinator.DispositionOf(err))), zap.Error(err))
		c.fail(w, r, statusOf(err), cl, "Not done: "+action+" "+operation, err)
		return
	}
	c.lg.Info("console action", zap.String("identity", cl.id.ID), zap.String("action", action), zap.String("tenant", tenant),
		zap.String("task", task), zap.String("operation", operation))
	// Post/redirect/get: a reload does not send the decision again.
	http.Redirect(w, r, Path+"op/"+url.PathEscape(tenant)+"/"+url.PathEscape(task)+"/"+url.PathEscape(operation)+"?done="+url.QueryEscape(action), http.StatusSeeOther)
}

func (c *Console) refuseForm(w http.ResponseWriter, r *http.Request, cl caller, action string, err error) {
	c.lg.Warn("console action refused: not from a console page", zap.String("identity", cl.id.ID), zap.String("action", action),
		zap.String("path", r.URL.Path), zap.String("origin", r.Header.Get("Origin")), zap.Error(err))
	c.fail(w, r, http.StatusForbidden, cl, "Not done: "+action, store.NewError(coordinator.PermissionDenied, "console "+action, "", "", err.Error(), nil))
}

// evidenceOf reads a resolution's evidence: provider ids one a line, and
// detail as JSON.
func evidenceOf(f url.Values) (ledger.Evidence, error) {
	var ev ledger.Evidence
	for _, id := range strings.Split(f.Get("provider_ids"), "\n") {
		if id = strings.TrimSpace(id); id != "" {
			ev.ProviderIDs = append(ev.ProviderIDs, id)
		}
	}
	if d := strings.TrimSpace(f.Get("detail")); d != "" {
		if !json.Valid([]byte(d)) {
			return ev, store.NewError(store.InvalidInput, "resolve", "", "", "evidence detail is not JSON", nil)
		}
		ev.Detail = json.RawMessage(d)
	}
	return ev, nil
}
