package store_test

import (
	"testing"

	"github.com/leasegate/leasegate/internal/store"
)

func TestParseLeaseID(t *testing.T) {
	t.Parallel()
	const big = int64(0x694d7b1f3c2a0b11) // above 2^53: as a JSON number, jq and JavaScript round it
	for in, want := range map[string]int64{
		"694d7b1f3c2a0b11":    big,
		"0x694d7b1f3c2a0b11":  big,
		"7587856321272744721": big,
		"0000000000000010":    16, // 16 digits: etcdctl's %016x
		"10":                  10,
		"ff":                  255,
	} {
		if got, err := store.ParseLeaseID(in); err != nil || got != want {
			t.Errorf("ParseLeaseID(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-5", "xyz", "0x", "ffffffffffffffff", "99999999999999999999"} {
		if got, err := store.ParseLeaseID(in); err == nil {
			t.Errorf("ParseLeaseID(%q) = %d; want an error", in, got)
		}
	}
	if s := store.FormatLeaseID(16); s != "0000000000000010" {
		t.Fatalf("FormatLeaseID(16) = %q", s)
	}
}
