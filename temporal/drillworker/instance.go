package drillworker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/leasegate/leasegate/client"
	lgtemporal "github.com/leasegate/leasegate/temporal"
)

// The drill's contract: the environment of an instance (docs/drill.md,
// "Drilling your own worker"), and where the Temporal server is.
const (
	EnvGateway          = "LEASEGATE_GATEWAY"
	EnvCA               = "LEASEGATE_CA"
	EnvCert             = "LEASEGATE_CERT"
	EnvKey              = "LEASEGATE_KEY"
	EnvTenant           = "LEASEGATE_TENANT"
	EnvTask             = "LEASEGATE_TASK"
	EnvPlan             = "LEASEGATE_PLAN"
	EnvInstance         = "LEASEGATE_INSTANCE"
	EnvSessionTTL       = "LEASEGATE_SESSION_TTL"
	EnvHeartbeatTimeout = "LEASEGATE_HEARTBEAT_TIMEOUT"
	// EnvTemporal is the Temporal frontend's host:port (cmd/drillworker
	// host prints it); the drill passes its own environment on to every
	// instance.
	EnvTemporal = "LEASEGATE_TEMPORAL_ADDRESS"
	// EnvNamespace is the Temporal namespace (default "default").
	EnvNamespace = "LEASEGATE_TEMPORAL_NAMESPACE"
)

// The contract's exit codes.
const (
	ExitDone   = 0 // the workflow completed: traffic points at the writer, as the gateway read it
	ExitFailed = 1 // anything else: the drill retries with a replacement
	ExitUsage  = 2 // it could not use what it was given
	ExitHeld   = 3 // the workflow held for the commander, or stopped on a record it will not act on
	ExitFenced = 4 // an attempt of this instance was refused stale_owner: another instance holds the task
)

// poll is how often an attempt looks again while it waits for a claim, an
// approval or the writer.
const poll = 100 * time.Millisecond

// config is an instance's environment, checked.
type config struct {
	gateway, ca, cert, key string
	tenant, task           string
	plan                   Plan
	instance               int
	ttl, heartbeat         time.Duration
	temporal, namespace    string
}

func readConfig(getenv func(string) string) (config, error) {
	var c config
	for _, name := range []string{EnvTemporal, EnvGateway, EnvCA, EnvCert, EnvKey, EnvTenant, EnvTask, EnvPlan,
		EnvInstance, EnvSessionTTL, EnvHeartbeatTimeout} {
		if getenv(name) == "" {
			return c, fmt.Errorf("%s is not set (run me under leasegate drill --worker with %s set: see docs/temporal.md)", name, EnvTemporal)
		}
	}
	c.temporal = getenv(EnvTemporal)
	c.gateway, c.ca, c.cert, c.key = getenv(EnvGateway), getenv(EnvCA), getenv(EnvCert), getenv(EnvKey)
	c.tenant, c.task = getenv(EnvTenant), getenv(EnvTask)
	if err := json.Unmarshal([]byte(getenv(EnvPlan)), &c.plan); err != nil {
		return c, fmt.Errorf("%s: %v", EnvPlan, err)
	}
	if err := c.plan.check(); err != nil {
		return c, fmt.Errorf("%s: %v", EnvPlan, err)
	}
	var err error
	if c.instance, err = strconv.Atoi(getenv(EnvInstance)); err != nil || c.instance < 1 {
		return c, fmt.Errorf("%s %q: want 1, 2, ...", EnvInstance, getenv(EnvInstance))
	}
	n, err := strconv.Atoi(getenv(EnvSessionTTL))
	if err != nil || n < 1 {
		return c, fmt.Errorf("%s %q: want whole seconds", EnvSessionTTL, getenv(EnvSessionTTL))
	}
	c.ttl = time.Duration(n) * time.Second
	s, err := strconv.ParseFloat(getenv(EnvHeartbeatTimeout), 64)
	if err != nil || s <= 0 {
		return c, fmt.Errorf("%s %q: want seconds", EnvHeartbeatTimeout, getenv(EnvHeartbeatTimeout))
	}
	c.heartbeat = time.Duration(s * float64(time.Second))
	if lgtemporal.TaskOf(c.task) != c.task {
		return c, fmt.Errorf("%s %q is not a label: the workflow id names the task", EnvTask, c.task)
	}
	c.namespace = getenv(EnvNamespace)
	if c.namespace == "" {
		c.namespace = "default"
	}
	return c, nil
}

// ActivityQueue is the activity task queue of a trial: one per trial (its
// instances hold that trial's certificates), the same for every instance
// of it. It is named from what every instance of the trial is given alike
// — the run's CA file, the path of the trial's gateway URL (its host and
// port are not: each instance reaches the gateway through a hop of its
// own), the tenant and the task.
func ActivityQueue(ca, gatewayURL, tenant, task string) string {
	path := gatewayURL
	if u, err := url.Parse(gatewayURL); err == nil {
		path = u.Path
	}
	sum := sha256.Sum256([]byte(ca + "\n" + path + "\n" + tenant + "\n" + task))
	return "leasegate-drill-activities-" + hex.EncodeToString(sum[:8])
}

// Main is one drill instance: it joins the trial's activity queue as a
// worker (one activity at a time), starts the trial's workflow (the first
// instance) or attaches to it (a replacement), and exits by the contract
// when the workflow ends or an attempt of its own is refused stale_owner
// (an attempt whose own lease lapsed is retried by Temporal instead, here
// or on another instance). Messages go
// to stderr.
func Main(getenv func(string) string, stderr io.Writer) int {
	c, err := readConfig(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "drillworker:", err)
		return ExitUsage
	}
	tlsCfg, err := client.TLSConfig(c.ca, c.cert, c.key)
	if err != nil {
		fmt.Fprintln(stderr, "drillworker: the certificate it was given:", err)
		return ExitUsage
	}
	gc, err := client.New(c.gateway, tlsCfg)
	if err != nil {
		fmt.Fprintln(stderr, "drillworker: the gateway it was given:", err)
		return ExitUsage
	}
	name := fmt.Sprintf("drill-instance-%d@%d", c.instance, os.Getpid())
	tc, err := sdkclient.Dial(sdkclient.Options{HostPort: c.temporal, Namespace: c.namespace, Identity: name, Logger: quiet{}})
	if err != nil {
		fmt.Fprintf(stderr, "drillworker: Temporal at %s (%s): %v\n", c.temporal, EnvTemporal, err)
		return ExitUsage
	}
	defer tc.Close()

	fenced := make(chan error, 1)
	acts, err := NewActivities(gc, c.ttl, poll, func(err error) {
		select {
		case fenced <- err:
		default:
		}
	})
	if err != nil {
		fmt.Fprintln(stderr, "drillworker:", err)
		return ExitUsage
	}
	queue := ActivityQueue(c.ca, c.gateway, c.tenant, c.task)
	// One activity at a time: a worker stopped inside its activity then
	// holds no poll the server could hand the retried attempt to.
	w := worker.New(tc, queue, worker.Options{MaxConcurrentActivityExecutionSize: 1, Identity: name})
	acts.Register(w)
	if err := w.Start(); err != nil {
		fmt.Fprintln(stderr, "drillworker: the activity worker:", err)
		return ExitFailed
	}
	defer w.Stop()

	// The first instance starts the trial's workflow (ending a run an
	// earlier drill left open under the same id); a replacement attaches
	// to the running one, or reads the result of the one that ended.
	opts := sdkclient.StartWorkflowOptions{ID: c.task, TaskQueue: WorkflowQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE}
	if c.instance == 1 {
		opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING
		opts.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	}
	ctx := context.Background()
	in := Input{Tenant: c.tenant, Plan: c.plan, ActivityQueue: queue, HeartbeatTimeout: c.heartbeat}
	run, err := tc.ExecuteWorkflow(ctx, opts, Recover, in)
	if err != nil {
		fmt.Fprintf(stderr, "drillworker: start workflow %s: %v\n", c.task, err)
		return ExitFailed
	}
	done := make(chan error, 1)
	var res Result
	go func() { done <- run.Get(ctx, &res) }()
	select {
	case err := <-fenced:
		fmt.Fprintln(stderr, "drillworker: fenced out:", err)
		return ExitFenced
	case err := <-done:
		return exitOf(res, err, stderr)
	}
}

// exitOf is the exit code of a workflow that ended with res, err.
func exitOf(res Result, err error, stderr io.Writer) int {
	var app *sdktemporal.ApplicationError
	switch {
	case err == nil && res.Done():
		fmt.Fprintf(stderr, "drillworker: done: %s points at the writer %s (promotion %s, traffic %s)\n",
			res.Traffic.Effect.Target, res.Writer, res.Promotion.Operation, res.Traffic.Operation)
		return ExitDone
	case err == nil:
		fmt.Fprintln(stderr, "drillworker: held for the commander:", res.Held)
		return ExitHeld
	case errors.As(err, &app) && (app.Type() == lgtemporal.ErrorTypeStopped || app.Type() == lgtemporal.ErrorTypeRefused):
		fmt.Fprintln(stderr, "drillworker: held for the commander: the workflow stopped:", err)
		return ExitHeld
	}
	fmt.Fprintln(stderr, "drillworker: the workflow failed:", err)
	return ExitFailed
}

// quiet drops the SDK's log lines: the drill keeps only the last of an
// instance's output, and it should be this program's.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}

var _ log.Logger = quiet{}
