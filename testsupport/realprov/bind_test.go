package realprov_test

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/leasegate/leasegate/testsupport/realprov"
)

// named answers for the zone, takes a TSIG-signed update from nsupdate
// (the serial moves), refuses an unsigned one, and leaves no process.
func TestDNSServerTakesSignedUpdatesOnly(t *testing.T) {
	realprov.Skip(t, realprov.HaveBIND)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := realprov.StartDNSServer(ctx, realprov.DNSConfig{Records: []string{"checkout 60 IN A 10.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = s.Close()
		}
	}()
	before, err := s.SOASerial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Nsupdate(ctx, "update delete checkout.example.test. A\nupdate add checkout.example.test. 60 A 10.0.0.2"); err != nil {
		t.Fatal(err)
	}
	r, err := s.Query(ctx, "checkout.example.test.", dns.TypeA)
	if err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.0.0.2" {
		t.Fatalf("after nsupdate: %v, %v", r, err)
	}
	after, _ := s.SOASerial(ctx)
	if after <= before {
		t.Fatalf("serial %d -> %d after an update", before, after)
	}

	m := new(dns.Msg)
	m.SetUpdate(s.Zone)
	rr, _ := dns.NewRR("checkout.example.test. 60 IN A 10.0.0.3")
	m.Insert([]dns.RR{rr})
	c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second}
	resp, _, err := c.ExchangeContext(ctx, m, s.Addr)
	if err != nil || resp.Rcode != dns.RcodeRefused {
		t.Fatalf("unsigned update: %v, %v; want REFUSED", resp, err)
	}

	dir := s.Dir
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	if pids := realprov.ProcessesIn(dir); len(pids) != 0 {
		t.Fatalf("processes left: %v", pids)
	}
}
