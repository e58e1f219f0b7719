package drill

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// The drill of a user's recovery worker (WithWorker): any program that
// speaks the gateway API, in any language, run as real processes against
// a real gateway in front of the trial's simulated providers, on real
// time (worker_world.go), with the world's own incident commander
// (worker_commander.go) and faults that reach the processes and the hops
// (worker_proc.go). The graders are the same, and read only the world: the
// providers' logs, the ledger's journal in etcd and the owner key's
// history in etcd — never anything the worker says.
//
// The worker's contract (docs/drill.md, "Drilling your own worker") is
// what each instance is given in its environment (the names below), what
// it must do (claim the task, reconcile, promote, then point traffic at
// the writer, through the gateway only), and its exit codes.

// DefaultWorkerTrials is a worker drill's trials unless WithTrials says
// otherwise (the CLI's default): each trial takes seconds of real time.
const DefaultWorkerTrials = 20

// Worker is the design name of a user's worker in the report.
const Worker Design = "worker"

// The worker's environment: the contract's inputs.
const (
	EnvGateway          = "LEASEGATE_GATEWAY"           // https://127.0.0.1:PORT/t/<trial>: the gateway's base URL
	EnvCA               = "LEASEGATE_CA"                // the CA file the gateway's certificate chains to
	EnvCert             = "LEASEGATE_CERT"              // this instance's client certificate (its identity)
	EnvKey              = "LEASEGATE_KEY"               // and its key
	EnvTenant           = "LEASEGATE_TENANT"            // the tenant of the incident task
	EnvTask             = "LEASEGATE_TASK"              // the incident task to claim
	EnvPlan             = "LEASEGATE_PLAN"              // the approved plan, JSON (WorkerPlan)
	EnvInstance         = "LEASEGATE_INSTANCE"          // 1, 2, ...: which start of the activity this is
	EnvSessionTTL       = "LEASEGATE_SESSION_TTL"       // seconds: the lease TTL to open the session with
	EnvHeartbeatTimeout = "LEASEGATE_HEARTBEAT_TIMEOUT" // seconds without a call before a replacement starts
)

// The worker's exit codes.
const (
	WorkerExitDone    = 0 // traffic points at the writer, verified at the gateway
	WorkerExitUsage   = 2 // it could not use what it was given: the drill's error, not a violation
	WorkerExitHeld    = 3 // it stopped for the commander (a refusal, a MANUAL_REVIEW, an operator's edit, etcd unreachable)
	WorkerExitFenced  = 4 // another instance holds the task (stale_owner, expired_owner): it stopped
	workerExitUnknown = -1
)

// WorkerPlan is the approved plan a worker is given (EnvPlan): the
// promotion the commander approves (its stable operation id, kind, target
// and parameters) and the traffic record to point at the writer once the
// promotion completed.
type WorkerPlan struct {
	Incident string        `json:"incident"`
	Promote  PlanPromotion `json:"promote"`
	Traffic  PlanTraffic   `json:"traffic"`
	// OriginalWriter is the writer before the incident, where the record
	// points.
	OriginalWriter string `json:"original_writer"`
	LossBound      string `json:"loss_bound"`
}

// PlanPromotion is the plan's promotion.
type PlanPromotion struct {
	Operation string        `json:"operation"`
	Kind      string        `json:"kind"`
	Target    string        `json:"target"`
	Params    promoteParams `json:"params"`
}

// PlanTraffic is the plan's traffic change: Kind on Record, its params
// {"record": Record, "value": <the writer>}, under operation ids that
// start with OperationPrefix.
type PlanTraffic struct {
	OperationPrefix string `json:"operation_prefix"`
	Kind            string `json:"kind"`
	Record          string `json:"record"`
}

func workerPlan(task string) WorkerPlan {
	return WorkerPlan{Incident: task,
		Promote: PlanPromotion{Operation: "promote/" + task, Kind: kindPromote, Target: clusterSecondary,
			Params: promoteParams{Target: clusterSecondary, MaxLoss: maxLoss.String()}},
		Traffic:        PlanTraffic{OperationPrefix: "traffic/" + task + "/", Kind: kindTraffic, Record: recordName},
		OriginalWriter: clusterPrimary, LossBound: maxLoss.String()}
}

// workerConfig is WithWorker's.
type workerConfig struct {
	argv []string
}

// WithWorker drills the program argv (its path and arguments) instead of
// the built-in designs: each trial runs instances of it as processes
// against the trial's gateway, under the world's faults, graded by the
// world. The design in the report is Worker. The program must exist and
// be executable; whether it follows the contract is checked as it runs
// (its first trial), a breach being the drill's error, never a violation.
func WithWorker(argv ...string) Option {
	return func(c *config) error {
		if len(argv) == 0 || strings.TrimSpace(argv[0]) == "" {
			return errors.New("worker: no command")
		}
		if _, err := exec.LookPath(argv[0]); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		c.worker = &workerConfig{argv: slices.Clone(argv)}
		c.Designs = []Design{Worker}
		return nil
	}
}

// Real-time settings of a worker's trial.
const (
	// procScale is how many world seconds pass in one real second: the
	// providers' and the commander's timings are the simulated drill's
	// (a promotion takes 4-12 s of world time), run twenty times faster.
	procScale = 20
	// procSessionTTL is the lease TTL a worker opens its session with
	// (EnvSessionTTL), real seconds: a paused instance loses its lease
	// this long after its last renewal.
	procSessionTTL = 3
	// procHeartbeat is how long the drill waits without a call from the
	// newest instance (a renewal is one) before it starts a replacement,
	// as Temporal retries an activity after its heartbeat timeout.
	procHeartbeat = 2 * time.Second
	// procFirstCall bounds an instance's start: a worker that makes no
	// call to the gateway within it does not follow the contract.
	procFirstCall = 2 * time.Minute
	// procTrialBound is a trial's real-time bound from its first call
	// to the gateway (40 minutes of the world's): instances still running
	// then are killed, and the world settles (settle) and is graded. It is
	// real time, not the world's, so that a machine too loaded to run the
	// worker's processes at speed does not end their trials early.
	procTrialBound = 2 * time.Minute
	// procSettle is how far the world runs on once a trial is over, past
	// its now, so that every pending change completes (the longest is a
	// DNS change left PENDING for 240 s).
	procSettle = 5 * time.Minute
	// procInstances is the most instances one trial starts.
	procInstances = 4
)

// ErrWorkerContract marks a worker that does not follow the contract
// (it could not start, exited 2, made no call): the drill's error.
var ErrWorkerContract = errors.New("the worker does not follow the drill's contract (docs/drill.md)")
