package store

import (
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Store is one etcd keyspace as leasegate reaches it: the client, the key
// layout, the limits a request is checked against, the logger and metrics
// of the coordinator that wraps it, and the cache of guards (guard.go). It
// is safe for concurrent use.
type Store struct {
	client  *clientv3.Client
	keys    Keys
	limits  Limits
	lg      *zap.Logger
	metrics *Metrics // nil: records nothing

	mu     sync.Mutex
	guards map[Grant]guarded
}

// Limits bound what a Store sends (coordinator's options).
type Limits struct {
	// RequestTimeout bounds a request whose context has no deadline.
	RequestTimeout time.Duration
	// MaxTxnOps and MaxRequestBytes are etcd's --max-txn-ops and
	// --max-request-bytes: a Txn over them is invalid_input before any I/O.
	MaxTxnOps, MaxRequestBytes int
}

// New is the store of prefix's keyspace on client. coordinator builds one
// per Coordinator.
func New(client *clientv3.Client, keys Keys, limits Limits, lg *zap.Logger, m *Metrics) *Store {
	return &Store{client: client, keys: keys, limits: limits, lg: lg, metrics: m}
}

// Client is the etcd client the store sends through.
func (s *Store) Client() *clientv3.Client { return s.client }

// Keys is the store's key layout.
func (s *Store) Keys() Keys { return s.keys }

// Logger is the coordinator's logger, for the packages built on it.
func (s *Store) Logger() *zap.Logger { return s.lg }

// Metrics is where the store counts (nil: nowhere).
func (s *Store) Metrics() *Metrics { return s.metrics }

// Of is the Store of c, a *coordinator.Coordinator: the one way the
// packages built on coordinator (fencedtxn, the ledger, retention, the
// gateway, the CLI, the drill, the benchmarks) reach it. It is not part of
// coordinator's API: Coordinator embeds a Handle, whose one method is
// unexported, so only this package can call it.
func Of(c Holder) *Store { return c.store() }

// Holder is what holds a Store: a *coordinator.Coordinator.
type Holder interface{ store() *Store }

// Handle is embedded in coordinator.Coordinator so that Of reaches its
// Store.
type Handle struct{ s *Store }

// NewHandle is the Handle of s.
func NewHandle(s *Store) Handle { return Handle{s} }

func (h Handle) store() *Store { return h.s }
