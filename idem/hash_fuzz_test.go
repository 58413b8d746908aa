package idem

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// FuzzCanonicalize checks Canonicalize on arbitrary input: it must not
// panic or touch its input; errors wrap exactly one sentinel in one line;
// successes are valid JSON that is a fixed point of Canonicalize with a
// consistent hash; and the single-pass canonicaliser agrees with the
// jsontext-based reference. Run with
//
//	go test ./idem -run XXX -fuzz FuzzCanonicalize -fuzztime 60s
func FuzzCanonicalize(f *testing.F) {
	for _, s := range hashSeedCorpus() {
		f.Add([]byte(s))
	}
	// Found by the fuzzer: a zero with an out-of-range exponent once took
	// the float path and came out as -0.
	f.Add([]byte("-0e700"))
	// Inputs that stop inside escapes and surrogate pairs, to steer the
	// fuzzer towards the single-pass parser's bounds checks.
	for _, s := range []string{`"\`, `"\u`, `"\ud83d\`, `"\ud83d\u`, `"\ud83d\ude0`, `"\ud83d\ude0"`, `{"\u0000":1,"\u0000 ":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		out, hash, err := Canonicalize(in, PayloadLimits{})
		if !bytes.Equal(in, orig) {
			t.Fatalf("Canonicalize modified its input %q to %q", orig, in)
		}
		checkFastMatchesReference(t, in)
		if err != nil {
			n := 0
			for _, s := range payloadSentinels {
				if errors.Is(err, s) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("error %q wraps %d sentinels, want exactly 1", err, n)
			}
			if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("error message is not one line: %q", msg)
			}
			if out != nil || hash != "" {
				t.Fatalf("error %v came with output %q, hash %q", err, out, hash)
			}
			return
		}

		if !jsontext.Value(out).IsValid() || !json.Valid(out) {
			t.Fatalf("canonical form %q of %q is not valid JSON", out, in)
		}
		// Canonical output is compact, and numbers grow at most from "1e20"
		// (4 bytes) to "100000000000000000000" (21 bytes).
		if len(out) == 0 || len(out) > 6*len(in) {
			t.Fatalf("canonical form of %d-byte input has %d bytes", len(in), len(out))
		}
		if !ValidHash(hash) || hash != HashCanonical(out) {
			t.Fatalf("hash %q does not match the canonical bytes %q", hash, out)
		}
		again, hash2, err := Canonicalize(out, PayloadLimits{})
		if err != nil {
			t.Fatalf("canonical form %q of %q is refused: %v", out, in, err)
		}
		if !bytes.Equal(again, out) || hash2 != hash {
			t.Fatalf("canonicalisation is not idempotent: %q -> %q -> %q", in, out, again)
		}
	})
}
