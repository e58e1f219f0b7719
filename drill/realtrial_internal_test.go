package drill

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasegate/leasegate/adapters/dnsupdate"
	"github.com/leasegate/leasegate/testsupport/lgtest"
	"github.com/leasegate/leasegate/testsupport/realprov"
)

// TestWatchSeesEveryChangeOfTheRecord changes the record twice on a real
// BIND server between two looks of the drill — a worker's update, then an
// operator's nsupdate, as when the gateway's change lands just before an
// operator's edit — and reads what the watch recorded: both changes, in
// the zone's order, each with its own serials as evidence (a confirmation
// cites the first one's), the last credited to the operator. Reading only
// the value at the second look would lose the first change and its
// evidence.
func TestWatchSeesEveryChangeOfTheRecord(t *testing.T) {
	realprov.Skip(t, realprov.HaveBIND)
	ctx := lgtest.Ctx(t)
	named := realprov.NewDNSServer(t, "checkout 60 IN A "+realAddr[realOriginal])
	up, err := dnsupdate.New(named.Addr, named.Zone, named.KeyFile, dnsupdate.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	serial, err := named.SOASerial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := &realWorld{ctx: ctx, prov: &RealProviders{dns: named, up: up}, design: Naive, traj: &Trajectory{},
		start: time.Now(), record: realOriginal, serial: serial}
	set := func(place string) {
		t.Helper()
		if err := named.Nsupdate(ctx, fmt.Sprintf("update delete %s A\nupdate add %s 60 A %s", realRecord, realRecord, realAddr[place])); err != nil {
			t.Fatal(err)
		}
	}
	set(realTarget)
	set(staticFallback)
	w.watchDNS(operatorCaller.actor, 0, "")
	var got []string
	for _, e := range w.traj.Events {
		if e.Kind == KindApplied && e.Effect == "insync" {
			got = append(got, fmt.Sprintf("%s by %s %v", e.Value, e.By, e.Evidence))
		}
	}
	want := []string{
		fmt.Sprintf("%s by unknown [%s serial %d %s serial %d->%d]", realTarget, named.Zone, serial+1, named.Zone, serial, serial+1),
		fmt.Sprintf("%s by %s [%s serial %d %s serial %d->%d]", staticFallback, operatorCaller.actor, named.Zone, serial+2, named.Zone, serial+1, serial+2),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the watch recorded\n%q\nwant\n%q", got, want)
	}
}
