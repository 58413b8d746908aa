package idem

import (
	"fmt"
	"testing"
	"unicode"
	"unicode/utf8"
)

// referenceCheckPart is checkPart without its ASCII fast path.
func referenceCheckPart(v string, max int) bool {
	if v == "" || len(v) > max || !utf8.ValidString(v) {
		return false
	}
	for _, r := range v {
		if unicode.Is(unicode.Cc, r) {
			return false
		}
	}
	return true
}

// TestCheckPartMatchesReference: the ASCII fast path of the identity check
// accepts and refuses exactly what the rule does (valid UTF-8, no control
// character), over every byte in every position of short strings and over
// fuzzed input.
func TestCheckPartMatchesReference(t *testing.T) {
	check := func(v string) {
		t.Helper()
		if got, want := checkPart("tenant_id", v, 16) == nil, referenceCheckPart(v, 16); got != want {
			t.Fatalf("checkPart(%q) accepts: %v, the rule: %v", v, got, want)
		}
	}
	for b := range 256 {
		for _, v := range []string{string([]byte{byte(b)}), "a" + string([]byte{byte(b)}) + "z", "op-" + string([]byte{byte(b)})} {
			check(v)
		}
	}
	for _, v := range []string{"", "tenant-1", "é", "\u0085", "\u009f", "\u00a0", "a\u2028b", "\xc2", "\xc2\x85", "ok\x7f", "0123456789abcdef", "0123456789abcdefg"} {
		check(v)
	}
	for i := range 2000 {
		v := fmt.Sprintf("t-%d\x1f", i)
		check(v[:min(len(v), 3+i%4)])
	}
}

func FuzzCheckPart(f *testing.F) {
	for _, s := range []string{"tenant", "\u0085", "\x00", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if got, want := checkPart("operation_id", v, 256) == nil, referenceCheckPart(v, 256); got != want {
			t.Fatalf("checkPart(%q) accepts: %v, the rule: %v", v, got, want)
		}
	})
}
