package drill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/leasegate/leasegate/adapters/dnsupdate"
	"github.com/leasegate/leasegate/adapters/pgpromote"
	"github.com/leasegate/leasegate/testsupport/realprov"
)

// The real-provider drill (WithRealProviders): the seed's failover on a
// real PostgreSQL pair (the database topology) and a real BIND server (the
// traffic record), with real-time workers. See realtrial.go.

// DefaultRealTrials is how many trials per design `leasegate drill
// --providers real` runs unless told otherwise.
const DefaultRealTrials = 20

// The real world's names: the nodes as the pgpromote adapter names them,
// the record traffic follows, and the address each value stands for.
const (
	realOriginal = "db-a" // the impaired primary
	realTarget   = "db-b" // its streaming standby, the promotion's target
	realRecord   = "checkout." + realprov.DNSZone
)

// realAddr is the A record's value for each place traffic can point.
var realAddr = map[string]string{
	realOriginal:   "10.0.0.1",
	realTarget:     "10.0.0.2",
	maintenance:    "10.0.0.9",
	staticFallback: "10.0.0.8",
}

// realName is the place an A record's values stand for ("(none)" for
// none, the address itself for one the drill does not know).
func realName(values []string) string {
	if len(values) == 0 {
		return "(none)"
	}
	for name, a := range realAddr {
		if slices.Equal(values, []string{a}) {
			return name
		}
	}
	return fmt.Sprint(values)
}

// RealProviders are the real servers one run of the real-provider drill
// works on, set up once and reset before every trial: a PostgreSQL 15
// primary and streaming standby (the standby reached through a CutProxy,
// which cuts the promote's connection after send), and BIND 9 named
// authoritative for the zone of the checkout record. Trials on them run one
// at a time.
type RealProviders struct {
	pair  *realprov.PGPair
	proxy *realprov.CutProxy
	dns   *realprov.DNSServer
	pg    *pgpromote.Adapter
	up    *dnsupdate.Adapter
	// proxyPort is the cut proxy's port (the standby as workers reach
	// it); passwordFile holds the workers' PostgreSQL password.
	proxyPort    int
	passwordFile string

	mu     sync.Mutex
	setup  time.Duration
	resets []time.Duration
}

// The adapters' timings on the real servers: pg_promote's wait (and the
// window in which a dispatched promote may still be finishing), and the
// ledger's bound on a provider call (a call paused longer than this cannot
// leave: its context ended).
const (
	realPromoteWait = 2 * time.Second
	realCallTimeout = 10 * time.Second
)

// StartRealProviders starts the servers (realprov: initdb, pg_basebackup,
// named) on loopback ports in temporary directories. It returns
// realprov.ErrAbsent when PostgreSQL or BIND is not installed (`make
// providers` installs them, as root). The caller must Close it.
func StartRealProviders(ctx context.Context) (_ *RealProviders, err error) {
	if err := errors.Join(realprov.HavePostgres(), realprov.HaveBIND()); err != nil {
		return nil, err
	}
	start := time.Now()
	p := &RealProviders{}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.Close())
		}
	}()
	if p.pair, err = realprov.StartPGPair(ctx); err != nil {
		return nil, err
	}
	if p.dns, err = realprov.StartDNSServer(ctx, realprov.DNSConfig{Records: []string{"checkout 60 IN A " + realAddr[realOriginal]}}); err != nil {
		return nil, err
	}
	if p.proxy, err = realprov.NewCutProxy(fmt.Sprintf("127.0.0.1:%d", p.pair.Standby.Port)); err != nil {
		return nil, err
	}
	p.proxyPort, p.passwordFile = p.proxy.Port(), p.pair.PasswordFile
	if p.pg, err = pgpromote.New([]pgpromote.Node{{Name: realOriginal, ConnString: p.pair.Primary.ConnString()}, {Name: realTarget, ConnString: p.standbyConn()}},
		p.pair.PasswordFile, pgpromote.WithPromoteWait(realPromoteWait), pgpromote.WithDialTimeout(time.Second)); err != nil {
		return nil, err
	}
	if p.up, err = dnsupdate.New(p.dns.Addr, p.dns.Zone, p.dns.KeyFile, dnsupdate.WithTimeout(2*time.Second)); err != nil {
		return nil, err
	}
	p.setup = time.Since(start)
	return p, nil
}

// standbyConn is the standby's connection string through the cut proxy.
func (p *RealProviders) standbyConn() string {
	return fmt.Sprintf("host=127.0.0.1 port=%d dbname=postgres user=%s sslmode=disable connect_timeout=5", p.proxyPort, realprov.PGUser)
}

// reset puts the world back where the incident starts: a fresh standby
// cloned from the primary (a promotion is one-way), the primary crashed,
// the record pointing at it, the proxy unarmed. It returns how long that
// took.
func (p *RealProviders) reset(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	p.proxy.Disarm()
	if err := p.pair.Reclone(ctx); err != nil {
		return 0, fmt.Errorf("drill: reset the standby: %w", err)
	}
	if err := p.pair.Primary.Crash(); err != nil { // 02:12: the primary becomes unreachable
		return 0, fmt.Errorf("drill: crash the primary: %w", err)
	}
	if err := p.dns.Nsupdate(ctx, fmt.Sprintf("update delete %s A\nupdate add %s 60 A %s", realRecord, realRecord, realAddr[realOriginal])); err != nil {
		return 0, fmt.Errorf("drill: reset the record: %w", err)
	}
	d := time.Since(start)
	p.mu.Lock()
	p.resets = append(p.resets, d)
	p.mu.Unlock()
	return d, nil
}

// RealStats is what setting up and resetting the servers cost in one run.
type RealStats struct {
	Setup time.Duration // starting the servers, once
	// Resets is how many resets (one per trial); P50 and Max their times.
	Resets   int
	P50, Max time.Duration
}

// Stats reports the setup and per-trial reset times so far.
func (p *RealProviders) Stats() RealStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := RealStats{Setup: p.setup, Resets: len(p.resets)}
	if len(p.resets) > 0 {
		r := slices.Clone(p.resets)
		slices.Sort(r)
		s.P50, s.Max = r[len(r)/2], r[len(r)-1]
	}
	return s
}

// Close stops every server and removes its directory.
func (p *RealProviders) Close() error {
	var errs []error
	if p.proxy != nil {
		p.proxy.Close()
	}
	if p.dns != nil {
		errs = append(errs, p.dns.Close())
	}
	if p.pair != nil {
		errs = append(errs, p.pair.Close())
	}
	return errors.Join(errs...)
}

// WithRealProviders runs the trials on real servers instead of the
// simulated providers, one trial at a time (Parallel is ignored) and in
// real time. Replays and scenarios are simulated only.
func WithRealProviders(p *RealProviders) Option {
	return func(c *config) error {
		if p == nil {
			return errors.New("nil real providers")
		}
		c.real = p
		return nil
	}
}

// checkReal is Run's check of a real-provider run's options.
func checkReal(c *config) error {
	if c.Replay >= 0 || c.Scenario != "" {
		return errors.New("replays and scenarios run on the simulated providers only")
	}
	for _, d := range c.Designs {
		if d != Fenced && d != Naive {
			return fmt.Errorf("design %s runs on the simulated providers only", d)
		}
	}
	c.Parallel = 1
	return nil
}
