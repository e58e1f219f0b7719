package cli

import "testing"

// TestLeaseID: lease IDs are read in hex as leasegate and etcdctl print
// them, with 0x, or in decimal; anything else is refused.
func TestLeaseID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"694d7c7e0c1f4a01", 0x694d7c7e0c1f4a01},
		{"0000000000000010", 0x10}, // 16 digits: hex even without letters
		{"0x694D7C7E0C1F4A01", 0x694d7c7e0c1f4a01},
		{"7587883720139372801", 7587883720139372801},
		{"12", 12},
		{"ab", 0xab},
		{"", 0}, {"0", 0}, {"-5", 0}, {"xyz", 0}, {"0x", 0}, {"8000000000000000", 0}, {"99999999999999999999", 0},
	} {
		got, err := leaseID(tc.in)
		if got != tc.want || (err == nil) != (tc.want != 0) {
			t.Errorf("leaseID(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}
