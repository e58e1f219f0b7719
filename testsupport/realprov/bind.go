package realprov

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// DNS defaults of the harness's zone.
const (
	DNSZone    = "example.test."
	DNSKeyName = "leasegate-update."
	DNSKeyAlg  = "hmac-sha256"
)

// DNSServer is BIND 9 named, authoritative for DNSZone on a loopback port,
// accepting RFC 2136 updates signed with its TSIG key.
type DNSServer struct {
	Addr    string // 127.0.0.1:port, UDP and TCP
	Zone    string // DNSZone
	KeyName string // the TSIG key's name (DNSKeyName)
	// KeyFile is the TSIG key in BIND's key-file syntax (what nsupdate -k
	// and the dnsupdate adapter read).
	KeyFile string
	Dir     string

	secret string
	acct   account
	server
}

// DNSConfig is what a DNSServer serves.
type DNSConfig struct {
	// Records are zone-file lines relative to the zone, e.g.
	// "checkout 60 IN A 10.0.0.1".
	Records []string
	// NoHistory makes named answer every IXFR with the whole zone
	// (provide-ixfr no), as a server without a journal from the asked
	// serial does.
	NoHistory bool
}

// NewDNSServer starts named for t with records (zone-file lines, relative
// to the zone, e.g. "checkout 60 IN A 10.0.0.1"), skipping t (SkipLine)
// when BIND is not installed; it is stopped in t.Cleanup.
func NewDNSServer(t testing.TB, records ...string) *DNSServer {
	t.Helper()
	return NewDNSServerWith(t, DNSConfig{Records: records})
}

// NewDNSServerWith is NewDNSServer with the whole configuration.
func NewDNSServerWith(t testing.TB, cfg DNSConfig) *DNSServer {
	t.Helper()
	Skip(t, HaveBIND)
	s, err := StartDNSServer(context.Background(), cfg)
	if err != nil {
		t.Fatalf("realprov: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("realprov: %v", err)
		}
	})
	return s
}

// StartDNSServer writes the zone and starts named on a free loopback port,
// returning once it answers for the zone's SOA. The zone's changes are
// kept in its journal and served by IXFR (max-ixfr-ratio unlimited, so a
// tiny zone still gets increments) unless cfg.NoHistory. The caller must
// Close it.
func StartDNSServer(ctx context.Context, cfg DNSConfig) (_ *DNSServer, err error) {
	records := cfg.Records
	if err := HaveBIND(); err != nil {
		return nil, err
	}
	acct, err := serverAccount("bind")
	if err != nil {
		acct = account{uid: os.Getuid(), gid: os.Getgid()} // named may run as root
	}
	dir, err := os.MkdirTemp("", "leasegate-dns-")
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	s := &DNSServer{server: server{name: "named"}, Zone: DNSZone, KeyName: DNSKeyName, KeyFile: filepath.Join(dir, "update.key"), Dir: dir,
		secret: base64.StdEncoding.EncodeToString(key), acct: acct}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if err := acct.mkdir(dir); err != nil {
		return nil, err
	}
	keyClause := fmt.Sprintf("key %q {\n\talgorithm %s;\n\tsecret %q;\n};\n", strings.TrimSuffix(DNSKeyName, "."), DNSKeyAlg, s.secret)
	if err := os.WriteFile(s.KeyFile, []byte(keyClause), 0o600); err != nil {
		return nil, err
	}
	zone := fmt.Sprintf("$ORIGIN %s\n$TTL 60\n@ IN SOA ns1 hostmaster 1 3600 600 86400 60\n@ IN NS ns1\nns1 IN A 127.0.0.1\n%s\n",
		DNSZone, strings.Join(records, "\n"))
	if err := acct.writeFile(filepath.Join(dir, "zone.db"), []byte(zone)); err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = s.start(ctx, port, keyClause, !cfg.NoHistory); lastErr == nil {
			return s, nil
		}
		if !strings.Contains(lastErr.Error(), "address in use") {
			break
		}
	}
	return nil, lastErr
}

func (s *DNSServer) start(ctx context.Context, port int, keyClause string, history bool) error {
	ixfr := "yes"
	if !history {
		ixfr = "no"
	}
	conf := fmt.Sprintf(`options {
	directory %[1]q;
	pid-file none;
	listen-on port %[2]d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	dnssec-validation no;
	allow-query { 127.0.0.1; };
	allow-transfer { key %[4]q; };
	notify no;
	max-ixfr-ratio unlimited;
	provide-ixfr %[6]s;
	session-keyfile none;
	managed-keys-directory %[1]q;
};
controls { };
%[3]s
zone %[5]q {
	type primary;
	file "zone.db";
	allow-update { key %[4]q; };
};
`, s.Dir, port, keyClause, strings.TrimSuffix(DNSKeyName, "."), strings.TrimSuffix(DNSZone, "."), ixfr)
	confPath := filepath.Join(s.Dir, "named.conf")
	if err := s.acct.writeFile(confPath, []byte(conf)); err != nil {
		return err
	}
	// Run as the bind user from the start (not named -u, whose own setuid
	// would clear the parent-death signal that stops named with us).
	cmd := s.acct.command(namedPath(), "-g", "-n", "1", "-c", confPath)
	cmd.Dir = s.Dir
	log := filepath.Join(s.Dir, "named.log")
	proc, err := startProcess(cmd, log)
	if err != nil {
		return err
	}
	s.set(proc)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, err := s.SOASerial(ctx); err == nil {
			return nil
		}
		select {
		case <-proc.done:
			return fmt.Errorf("realprov: named exited at start (%v): %s", proc.err, readTail(log))
		case <-ctx.Done():
			_ = proc.stop(syscall.SIGTERM, 5*time.Second)
			return fmt.Errorf("realprov: named not answering: %s", readTail(log))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Secret is the TSIG key's secret (base64), for a client that signs with
// it directly (tests; an adapter reads KeyFile).
func (s *DNSServer) Secret() string { return s.secret }

// Query asks the server for name's RRset of type qtype (over TCP).
func (s *DNSServer) Query(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second}
	r, _, err := c.ExchangeContext(ctx, m, s.Addr)
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
		return r, fmt.Errorf("realprov: query %s: %s", name, dns.RcodeToString[r.Rcode])
	}
	return r, nil
}

// SOASerial is the zone's SOA serial now.
func (s *DNSServer) SOASerial(ctx context.Context) (uint32, error) {
	r, err := s.Query(ctx, s.Zone, dns.TypeSOA)
	if err != nil {
		return 0, err
	}
	for _, rr := range r.Answer {
		if soa, ok := rr.(*dns.SOA); ok {
			return soa.Serial, nil
		}
	}
	return 0, errors.New("realprov: no SOA in the answer")
}

// Nsupdate runs nsupdate -k KeyFile with script (its commands, without
// the server line and the final send), as an operator editing the zone.
func (s *DNSServer) Nsupdate(ctx context.Context, script string) error {
	host, port, _ := net.SplitHostPort(s.Addr)
	in := fmt.Sprintf("server %s %s\nzone %s\n%s\nsend\n", host, port, s.Zone, strings.TrimSpace(script))
	cmd := exec.CommandContext(ctx, "nsupdate", "-k", s.KeyFile, "-t", "5")
	cmd.Stdin = strings.NewReader(in)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("realprov: nsupdate: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Stop stops named (SIGTERM) and waits for it.
func (s *DNSServer) Stop() error { return s.stopWith(syscall.SIGTERM, 20*time.Second) }

// Close stops named and removes its directory; it fails if a process is
// still running in it afterwards.
func (s *DNSServer) Close() error {
	errs := []error{s.Stop()}
	if pids := ProcessesIn(s.Dir); len(pids) > 0 {
		errs = append(errs, fmt.Errorf("realprov: processes still running in %s after Close: %v", s.Dir, pids))
	}
	errs = append(errs, os.RemoveAll(s.Dir))
	return errors.Join(errs...)
}
