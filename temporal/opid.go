package temporal

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// TaskOf is the leasegate task of the workflow with id workflowID: the id
// itself when it is a label (1–80 printable ASCII characters), else "wf-"
// and 32 hex digits of its SHA-256. Every effect of the workflow is scoped
// to this task, and every attempt of every effect activity claims it.
func TaskOf(workflowID string) string {
	if coordinator.CheckLabel("task", workflowID) == nil {
		return workflowID
	}
	sum := sha256.Sum256([]byte(workflowID))
	return "wf-" + hex.EncodeToString(sum[:16])
}

// OperationIDOf is the operation id of step in the workflow workflowID:
// "<task>/<step>" when that is a label, else "op-" and 40 hex digits of the
// SHA-256 of the workflow id and the step (length-prefixed, so no two
// pairs collide by concatenation). It depends on nothing else — not the
// attempt, the run id, the worker or the time — so every attempt of the
// step, on any worker and any build, names the same operation.
func OperationIDOf(workflowID, step string) (string, error) {
	if err := coordinator.CheckLabel("step", step); err != nil {
		return "", store.NewError(store.InvalidInput, "operation id", "", "", fmt.Sprintf("%v", err), nil)
	}
	if strings.Contains(step, "/") {
		// "<task>/<step>" splits at its last '/': a step with one would let
		// two pairs name one operation ("a/b" + "c", "a" + "b/c").
		return "", store.NewError(store.InvalidInput, "operation id", "", "", fmt.Sprintf("step %q contains '/'", step), nil)
	}
	if workflowID == "" {
		return "", store.NewError(store.InvalidInput, "operation id", "", "", "the workflow id is empty", nil)
	}
	if id := TaskOf(workflowID) + "/" + step; coordinator.CheckLabel("operation", id) == nil {
		return id, nil
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s%d:%s", len(workflowID), workflowID, len(step), step)
	return "op-" + hex.EncodeToString(h.Sum(nil)[:20]), nil
}

// OperationID is the operation id of step in the calling workflow: minted
// in workflow code, once, and handed to the activity. It reads only the
// workflow id (replay-safe: the same on every replay) and step.
func OperationID(ctx workflow.Context, step string) (string, error) {
	return OperationIDOf(workflow.GetInfo(ctx).WorkflowExecution.ID, step)
}
