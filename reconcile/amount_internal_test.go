package reconcile

import "testing"

func TestToMinor(t *testing.T) {
	cases := []struct {
		v    string
		exp  int
		want string
		ok   bool
	}{
		{"12.50", 2, "1250", true}, {"1250", 0, "1250", true}, {"1.250", 3, "1250", true}, {"1.2345", 4, "12345", true},
		{"-12.5", 2, "-1250", true}, {"12.500", 2, "1250", true}, {"12.505", 2, "", false}, {"0.5", 0, "", false},
		{"1.25e1", 2, "1250", true}, {"922337203685477580.7", 2, "92233720368547758070", true},
	}
	for _, c := range cases {
		got, ok := toMinor(c.v, c.exp)
		if got != c.want || ok != c.ok {
			t.Errorf("toMinor(%q, %d) = %q, %v; want %q, %v", c.v, c.exp, got, ok, c.want, c.ok)
		}
	}
}
