package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
)

// benchPayloadSmall returns a realistic ~300-byte payment request, written
// the way clients write them (indentation, insertion-ordered keys), so that
// canonicalisation has real work to do. It needs no *testing.T, so other
// tests and benchmarks in the package can reuse it.
func benchPayloadSmall() []byte {
	return []byte(`{
  "type": "payment.create",
  "amount": 1234.56,
  "currency": "EUR",
  "customer": {"id": "cus_8f3a2b91c4", "email": "ada@example.com", "name": "Ada Lovelace"},
  "description": "Invoice 2024-0042 – consulting",
  "metadata": {"order_id": 987654321, "retry": false, "tags": ["b2b", "priority"]},
  "capture": true
}`)
}

// benchPayloadLarge returns a realistic payload of about 64 KiB: an order
// with arrays of line items holding strings, integers and decimal amounts
// such as 12.34. Like benchPayloadSmall it is deterministic and reusable.
func benchPayloadLarge() []byte {
	const target = 64 << 10
	var b bytes.Buffer
	b.WriteString(`{"order_id": "ord_2024_000042", "currency": "EUR", "customer": {"id": "cus_8f3a2b91c4", "name": "Ada Lovelace", "address": {"street": "12 Analytical Row", "city": "London", "postcode": "N1 9GU", "country": "GB"}}, "items": [`)
	// The closing text is fixed; add items until the next one would overflow.
	const tail = `], "total_items": 0, "note": "generated for benchmarks"}`
	for i := 0; ; i++ {
		sep := ",\n    "
		if i == 0 {
			sep = ""
		}
		item := fmt.Sprintf(`%s{"sku": "SKU-%06d", "name": "Widget model %d, blue – größe %d", "quantity": %d, "unit_price": %d.%02d, "discount": 0.%02d, "tax_rate": 0.2, "tags": ["hardware", "cat-%d"], "in_stock": %t}`,
			sep, i*7919%1000000, i, i%50, 1+i%9, 1+i%997, i%100, i%25, i%13, i%3 != 0)
		if b.Len()+len(item)+len(tail) > target {
			break
		}
		b.WriteString(item)
	}
	b.WriteString(tail)
	out := b.Bytes()
	// Fix up the count so the payload is self-consistent (cosmetic only).
	n := bytes.Count(out, []byte(`"sku"`))
	return bytes.Replace(out, []byte(`"total_items": 0`), []byte(`"total_items": `+strconv.Itoa(n)), 1)
}

// hashEncodingJSON is the baseline the canonical hash is measured against:
// what a service would do with only the standard library (decode into any,
// re-encode, which sorts map keys, then hash).
func hashEncodingJSON(raw []byte) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return HashCanonical(out), nil
}

func BenchmarkHash(b *testing.B) {
	payloads := []struct {
		name string
		raw  []byte
	}{
		{"300B", benchPayloadSmall()},
		{"64KiB", benchPayloadLarge()},
	}
	for _, p := range payloads {
		if _, _, err := Canonicalize(p.raw, PayloadLimits{}); err != nil {
			b.Fatalf("%s payload refused: %v", p.name, err)
		}
		b.Run("canonical_"+p.name, func(b *testing.B) {
			b.SetBytes(int64(len(p.raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Canonicalize(p.raw, PayloadLimits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("encoding_json_"+p.name, func(b *testing.B) {
			b.SetBytes(int64(len(p.raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := hashEncodingJSON(p.raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCanonicalizeParts isolates the pieces of Canonicalize, to show
// where the time goes when the ratio against encoding/json needs
// investigating: the single-pass canonicaliser, the jsontext-based reference
// path (used to diagnose errors), and SHA-256 alone.
func BenchmarkCanonicalizeParts(b *testing.B) {
	for _, p := range []struct {
		name string
		raw  []byte
	}{{"300B", benchPayloadSmall()}, {"64KiB", benchPayloadLarge()}} {
		b.Run("fast_"+p.name, func(b *testing.B) {
			b.SetBytes(int64(len(p.raw)))
			for b.Loop() {
				if _, ok := fastCanonicalize(p.raw, DefaultMaxDepth); !ok {
					b.Fatal("refused")
				}
			}
		})
		b.Run("reference_"+p.name, func(b *testing.B) {
			b.SetBytes(int64(len(p.raw)))
			for b.Loop() {
				if _, err := referenceCanonicalize(p.raw, DefaultMaxDepth); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("sha256_"+p.name, func(b *testing.B) {
			b.SetBytes(int64(len(p.raw)))
			for b.Loop() {
				sha256.Sum256(p.raw)
			}
		})
	}
}
