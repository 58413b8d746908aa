package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"pgregory.net/rapid"
)

// hashFataler is what the helpers need from *testing.T and *rapid.T alike.
type hashFataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// payloadSentinels lists every error Canonicalize may wrap, to check that each
// error wraps exactly one of them.
var payloadSentinels = []error{
	ErrInvalidJSON, ErrDuplicateKey, ErrInvalidUTF8, ErrLoneSurrogate,
	ErrLossyNumber, ErrPayloadTooLarge, ErrTooDeep,
}

// mustCanonicalize canonicalises in with default limits and fails the test
// on error. It also checks the invariants every success must satisfy.
func mustCanonicalize(t testing.TB, in string) string {
	t.Helper()
	out, hash, err := Canonicalize([]byte(in), PayloadLimits{})
	if err != nil {
		t.Fatalf("Canonicalize(%q): unexpected error: %v", in, err)
	}
	if want := HashCanonical(out); hash != want {
		t.Fatalf("Canonicalize(%q): hash %s, but HashCanonical of the output is %s", in, hash, want)
	}
	if !ValidHash(hash) {
		t.Fatalf("Canonicalize(%q): invalid hash %q", in, hash)
	}
	return string(out)
}

// checkPayloadError asserts that err wraps want and no other sentinel, and
// that its message is a single line.
func checkPayloadError(t testing.TB, in []byte, err, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("Canonicalize(%.80q): no error, want %v", in, want)
	}
	for _, s := range payloadSentinels {
		if got := errors.Is(err, s); got != (s == want) {
			t.Errorf("Canonicalize(%.80q): errors.Is(err, %q) = %v; err = %v", in, s, got, err)
		}
	}
	if msg := err.Error(); strings.ContainsAny(msg, "\r\n") || msg == "" {
		t.Errorf("Canonicalize(%.80q): message is not a single line: %q", in, msg)
	}
}

// TestHashRFC8785NumberTable checks the number serialisation samples of
// RFC 8785 Appendix B. The table gives float64 bit patterns and their
// canonical text; the text, read back as input, must be accepted unchanged
// (it is canonical, and it denotes its own value exactly by definition).
func TestHashRFC8785NumberTable(t *testing.T) {
	table := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"}, // minus zero
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tc := range table {
		f := math.Float64frombits(tc.bits)
		got := string(jsontext.AppendFloat(nil, f, 64))
		if f == 0 {
			got = "0" // AppendFloat keeps the sign of -0; RFC 8785 and Canonicalize do not
		}
		if got != tc.want {
			t.Errorf("AppendFloat(%#016x) = %s, want %s", tc.bits, got, tc.want)
		}
		if out := mustCanonicalize(t, tc.want); out != tc.want {
			t.Errorf("Canonicalize(%s) = %s, want it unchanged", tc.want, out)
		}
	}
	// NaN and Infinity (0x7fffffffffffffff, 0x7ff0000000000000) have no JSON
	// spelling; the closest a payload can come is an overflowing literal.
	for _, in := range []string{"1e309", "-1e309", "NaN", "Infinity"} {
		_, _, err := Canonicalize([]byte(in), PayloadLimits{})
		if err == nil {
			t.Errorf("Canonicalize(%s) succeeded, want an error", in)
		}
	}
}

// TestHashAcceptedNumbers lists spellings whose canonical text denotes the
// same decimal value, so they are accepted and normalised.
//
// The rule is "the canonical text's decimal value equals the literal's
// decimal value", which compares texts, not binary floats: 0.1 and 5e-324
// are accepted although no float64 equals them exactly, because the
// canonical text (the bytes that get hashed) is again 0.1 and 5e-324.
func TestHashAcceptedNumbers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0", "0"},
		{"-0", "0"},
		{"0.0", "0"},
		{"-0.000e-5", "0"},
		{"-0e700", "0"}, // found by the fuzzer: once came out as -0
		{"0e-99999999999999999999999", "0"},
		{"1.0", "1"},
		{"1e2", "100"},
		{"1E+2", "100"},
		{"1e+2", "100"},
		{"100.000", "100"},
		{"0.1", "0.1"},
		{"12.34", "12.34"},
		{"1234.5600", "1234.56"},
		{"-12.340e1", "-123.4"},
		{"4.50", "4.5"},
		{"2e-3", "0.002"},
		{"0.000001", "0.000001"},
		{"1e-6", "0.000001"},
		{"1e-7", "1e-7"},
		{"0.0000001", "1e-7"},
		{"1e+30", "1e+30"},
		{"1E30", "1e+30"},
		{"0.000000000000000000000000001", "1e-27"},
		{"1e20", "100000000000000000000"},
		{"1e21", "1e+21"},
		{"1000000000000000000000", "1e+21"},
		{"123e-2", "1.23"},
		{"-1.5E-10", "-1.5e-10"},
		{"9007199254740992", "9007199254740992"},
		{"-9007199254740992", "-9007199254740992"},
		{"9007199254740991", "9007199254740991"},
		{"123456789012345", "123456789012345"}, // 15 digits: always exact
		{"999999999999999", "999999999999999"},
		{"1234567890123456", "1234567890123456"}, // 16 digits, still exact
		{"5e-324", "5e-324"},
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"333333333.3333333", "333333333.3333333"},
		{"1e-307", "1e-307"},
		{"9.99999999999999e307", "9.99999999999999e+307"},
		{"2.2250738585072014e-308", "2.2250738585072014e-308"}, // smallest normal
		{"1e23", "1e+23"},                                      // no float64 is 1e23, but the canonical text is
	} {
		if got := mustCanonicalize(t, tc.in); got != tc.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestHashLossyNumbers lists literals whose canonical text would denote a
// different value; each must be refused, naming the literal and the value it
// would become.
func TestHashLossyNumbers(t *testing.T) {
	for _, tc := range []struct{ in, becomes string }{
		{"9007199254740993", "9007199254740992"},
		{"-9007199254740993", "-9007199254740992"},
		{"0.30000000000000001", "0.3"},
		{"333333333.33333329", "333333333.3333333"},
		{"123456789012345678901234567890", "1.2345678901234568e+29"},
		{"1e400", "1.7976931348623157e+308"},
		{"-1e400", "-1.7976931348623157e+308"},
		{"1e-400", "0"},
		{"-1e-400", "0"},
		{"2.4703282292062328e-324", "5e-324"}, // rounds up to the smallest subnormal
		{"1.00000000000000000000001", "1"},
		// 2^68 is exactly a float64, yet RFC 8785 writes it with trailing
		// zeros, which is a different decimal value.
		{"295147905179352825856", "295147905179352830000"},
	} {
		in := []byte(`{"amount": ` + tc.in + `}`)
		_, _, err := Canonicalize(in, PayloadLimits{})
		checkPayloadError(t, in, err, ErrLossyNumber)
		if err == nil {
			continue
		}
		want := "number " + tc.in + " at byte 11 would change value when canonicalised (becomes " + tc.becomes + ")"
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "send it as a string") {
			t.Errorf("Canonicalize(%s): message %q does not contain %q", in, err, want)
		}
	}
}

// rfc8785Sample is the example of RFC 8785 section 3.2.2, which also appears
// canonicalised in section 3.2.3.
const rfc8785Sample = `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`

func TestHashRFC8785Sample(t *testing.T) {
	// The sample's first number is not exactly representable: RFC 8785
	// turns 333333333.33333329 into 333333333.3333333, a different value.
	// Of the others, 1E30, 4.50, 2e-3 and 1e-27 keep their values.
	_, _, err := Canonicalize([]byte(rfc8785Sample), PayloadLimits{})
	checkPayloadError(t, []byte(rfc8785Sample), err, ErrLossyNumber)
	if err != nil && !strings.Contains(err.Error(), "333333333.33333329") {
		t.Errorf("message %q does not name the lossy literal", err)
	}

	// With the lossy literal replaced by the value it denotes, the rest of
	// the sample must produce the RFC's expected output byte for byte.
	exact := strings.Replace(rfc8785Sample, "333333333.33333329", "333333333.3333333", 1)
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got := mustCanonicalize(t, exact)
	if got != want {
		t.Errorf("canonical sample:\n got %s\nwant %s", got, want)
	}
	// The reference implementation (jsontext, which does not refuse lossy
	// numbers) gives the RFC's output for the original sample.
	if ref, err := jsontext.AppendFormat(nil, []byte(rfc8785Sample),
		jsontext.CanonicalizeRawInts(true), jsontext.CanonicalizeRawFloats(true),
		jsontext.ReorderRawObjects(true)); err != nil || string(ref) != want {
		t.Errorf("jsontext on the RFC sample = %s, %v; want %s", ref, err, want)
	}
}

// TestHashRFC8785Sorting checks the member sorting example of RFC 8785
// section 3.2.3: names are compared as UTF-16 code units, so U+1F600
// (surrogates D83D DE00) sorts before U+FB33, and U+0080 is written raw.
func TestHashRFC8785Sorting(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := "{" +
		`"\r":"Carriage Return",` +
		`"1":"One",` +
		"\"\u0080\":\"Control\"," +
		"\"\u00f6\":\"Latin Small Letter O With Diaeresis\"," +
		"\"\u20ac\":\"Euro Sign\"," +
		"\"\U0001F600\":\"Emoji: Grinning Face\"," +
		"\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"" +
		"}"
	if got := mustCanonicalize(t, in); got != want {
		t.Errorf("sorted:\n got %s\nwant %s", got, want)
	}
}

func TestHashCompareUTF16(t *testing.T) {
	// Ordered by UTF-16 code units; note U+10000 < U+E000 < U+FFFF there,
	// unlike in code point (and UTF-8 byte) order.
	ordered := []string{"", "\x00", "a", "ab", "b", "\u0080", "\u07ff", "\u0800", "\ud7ff", "\U00010000", "\U0001F600", "\U0010FFFF", "\ue000", "\ufb33", "\uffff"}
	for i, a := range ordered {
		for j, b := range ordered {
			got := compareUTF16([]byte(a), []byte(b))
			if (got < 0) != (i < j) || (got == 0) != (i == j) {
				t.Errorf("compareUTF16(%q, %q) = %d, want sign of %d", a, b, got, i-j)
			}
		}
	}
}

func TestHashStrings(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"plain"`, `"plain"`},
		{`"\u0041\u00e9\u20AC"`, "\"A\u00e9\u20ac\""},
		{`"\/"`, `"/"`},
		{`"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
		{`"\u0008\u000C\u000a\u000D\u0009"`, `"\b\f\n\r\t"`},
		{`"\u0000\u001F\u001f"`, `"\u0000\u001f\u001f"`},
		{`"\u007f\u0080\u2028"`, "\"\u007f\u0080\u2028\""},
		{`"\"\\"`, `"\"\\"`},
		{`"\u0022\u005C"`, `"\"\\"`},
		{`"\uD83D\uDE00 \ud83d\ude00"`, "\"\U0001F600 \U0001F600\""},
		{"\"\U0001F600\"", "\"\U0001F600\""},
		{"\"\uffff\ufeff\"", "\"\uffff\ufeff\""},
		{`"\uDBFF\uDFFF"`, "\"\U0010FFFF\""},
	} {
		if got := mustCanonicalize(t, tc.in); got != tc.want {
			t.Errorf("Canonicalize(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestHashWhitespaceAndScalars(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{" \t\r\n{ \"a\" :\t[ 1 , true,false , null ] }\n", `{"a":[1,true,false,null]}`},
		{"null", "null"},
		{" true ", "true"},
		{`""`, `""`},
		{"[]", "[]"},
		{"{}", "{}"},
		{"[[],{},[{}]]", "[[],{},[{}]]"},
		{`{"b":{"d":1,"c":2},"a":[{"z":0,"y":1}]}`, `{"a":[{"y":1,"z":0}],"b":{"c":2,"d":1}}`},
		{`{"a":1,"a ":2,"A":3,"":4}`, `{"":4,"A":3,"a":1,"a ":2}`},
	} {
		if got := mustCanonicalize(t, tc.in); got != tc.want {
			t.Errorf("Canonicalize(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestHashLargeObject covers objects beyond the insertion-sort size, where
// the general sort and its duplicate check take over.
func TestHashLargeObject(t *testing.T) {
	var names []string
	for i := range 60 {
		names = append(names, fmt.Sprintf("k%02d", i), fmt.Sprintf(`\u00e9%d`, i), fmt.Sprintf(`\ud83d\ude00%d`, i), fmt.Sprintf(`\ufb33%d`, i))
	}
	// A fixed shuffle, so that the input is far from sorted.
	for i := range names {
		j := (i*7919 + 13) % len(names)
		names[i], names[j] = names[j], names[i]
	}
	var b strings.Builder
	b.WriteString("{")
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"%s": %d`, n, i)
	}
	b.WriteString("}")
	in := []byte(b.String())
	checkFastMatchesReference(t, in)
	out := mustCanonicalize(t, string(in))
	if !strings.HasPrefix(out, `{"k00":`) || !strings.Contains(out, "\"\U0001F6000\":") {
		t.Errorf("unexpected canonical form %s", out)
	}

	dup := []byte(strings.Replace(string(in), "}", `, "k42": 0}`, 1))
	_, _, err := Canonicalize(dup, PayloadLimits{})
	checkPayloadError(t, dup, err, ErrDuplicateKey)
	checkFastMatchesReference(t, dup)
}

func TestHashErrors(t *testing.T) {
	nested := func(open, close string, depth int) string {
		return strings.Repeat(open, depth) + strings.Repeat(close, depth)
	}
	for _, tc := range []struct {
		name string
		in   string
		lim  PayloadLimits
		want error
		msg  string // substring the message must contain
	}{
		{"empty", "", PayloadLimits{}, ErrInvalidJSON, "empty"},
		{"only whitespace", " \n ", PayloadLimits{}, ErrInvalidJSON, "ends unexpectedly"},
		{"truncated object", `{"a":1`, PayloadLimits{}, ErrInvalidJSON, "at byte 6"},
		{"truncated string", `"abc`, PayloadLimits{}, ErrInvalidJSON, ""},
		{"trailing comma", `[1,]`, PayloadLimits{}, ErrInvalidJSON, "at byte 3"},
		{"trailing garbage", `{"a":1}x`, PayloadLimits{}, ErrInvalidJSON, "at byte 7"},
		{"two values", `1 2`, PayloadLimits{}, ErrInvalidJSON, "at byte 2"},
		{"single quotes", `{'a':1}`, PayloadLimits{}, ErrInvalidJSON, ""},
		{"unquoted name", `{a:1}`, PayloadLimits{}, ErrInvalidJSON, ""},
		{"leading zero", `01`, PayloadLimits{}, ErrInvalidJSON, ""},
		{"leading plus", `+1`, PayloadLimits{}, ErrInvalidJSON, ""},
		{"bare dot", `.5`, PayloadLimits{}, ErrInvalidJSON, ""},
		{"trailing dot", `1.`, PayloadLimits{}, ErrInvalidJSON, ""},
		{"NaN", `NaN`, PayloadLimits{}, ErrInvalidJSON, ""},
		{"raw control char", "\"a\tb\"", PayloadLimits{}, ErrInvalidJSON, ""},
		{"raw newline", "\"a\nb\"", PayloadLimits{}, ErrInvalidJSON, ""},
		{"bad escape", `"\x"`, PayloadLimits{}, ErrInvalidJSON, ""},
		{"short unicode escape", `"\u12"`, PayloadLimits{}, ErrInvalidJSON, ""},
		{"byte order mark", "\ufeff{}", PayloadLimits{}, ErrInvalidJSON, ""},
		{"comment", `{"a":1 /* x */}`, PayloadLimits{}, ErrInvalidJSON, ""},
		{"mismatched brackets", `[1}`, PayloadLimits{}, ErrInvalidJSON, ""},
		{"tru", `tru`, PayloadLimits{}, ErrInvalidJSON, ""},

		{"duplicate key", `{"a":1,"a":2}`, PayloadLimits{}, ErrDuplicateKey, `"a"`},
		{"duplicate key escaped", `{"a":1,"\u0061":2}`, PayloadLimits{}, ErrDuplicateKey, `"a" at byte 7`},
		{"duplicate key nested", `{"x":[{"b":1,"c":2,"b":3}]}`, PayloadLimits{}, ErrDuplicateKey, `"b" in object "/x/0"`},
		{"duplicate key non-adjacent", `{"b":1,"a":2,"c":3,"a":4}`, PayloadLimits{}, ErrDuplicateKey, `"a"`},
		{"duplicate key with newline", `{"a\nb":1,"a\u000ab":2}`, PayloadLimits{}, ErrDuplicateKey, ""},

		{"invalid UTF-8 byte", "\"a\xffb\"", PayloadLimits{}, ErrInvalidUTF8, "0xff at byte 2"},
		{"invalid UTF-8 in name", "{\"\xc3\x28\":1}", PayloadLimits{}, ErrInvalidUTF8, "at byte 2"},
		{"overlong UTF-8", "\"\xc0\xaf\"", PayloadLimits{}, ErrInvalidUTF8, ""},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", PayloadLimits{}, ErrInvalidUTF8, ""},
		{"invalid UTF-8 outside string", "[\xff]", PayloadLimits{}, ErrInvalidUTF8, "at byte 1"},
		{"truncated UTF-8", "\"\xe2\x82\"", PayloadLimits{}, ErrInvalidUTF8, ""},

		{"lone high surrogate", `"\ud800"`, PayloadLimits{}, ErrLoneSurrogate, `\ud800 at byte 1`},
		{"lone low surrogate", `"\udc00"`, PayloadLimits{}, ErrLoneSurrogate, ""},
		{"high surrogate then char", `["\uD83Dx"]`, PayloadLimits{}, ErrLoneSurrogate, "at byte 2"},
		{"high surrogate then non-low escape", `{"a":"\ud800\u0041"}`, PayloadLimits{}, ErrLoneSurrogate, ""},
		{"two high surrogates", `"\ud83d\ud83d"`, PayloadLimits{}, ErrLoneSurrogate, ""},
		{"reversed pair", `"\ude00\ud83d"`, PayloadLimits{}, ErrLoneSurrogate, ""},
		{"lone surrogate in name", `{"\udfff":1}`, PayloadLimits{}, ErrLoneSurrogate, ""},

		{"lossy integer", `9007199254740993`, PayloadLimits{}, ErrLossyNumber, "9007199254740993 at byte 0"},
		{"lossy decimal", `[0.30000000000000001]`, PayloadLimits{}, ErrLossyNumber, "becomes 0.3"},
		{"lossy overflow", `1e400`, PayloadLimits{}, ErrLossyNumber, ""},
		{"lossy huge integer", `123456789012345678901234567890`, PayloadLimits{}, ErrLossyNumber, ""},

		{"too large", `{"a":"0123456789"}`, PayloadLimits{MaxBytes: 10}, ErrPayloadTooLarge, "18 bytes exceeds the limit of 10 bytes"},

		{"too deep arrays", nested("[", "]", 65), PayloadLimits{}, ErrTooDeep, "limit of 64 at byte 64"},
		{"too deep objects", strings.Repeat(`{"a":`, 4) + "1" + strings.Repeat("}", 4), PayloadLimits{MaxDepth: 3}, ErrTooDeep, "limit of 3 at byte 15"},
		{"too deep mixed", `[{"a":[{}]}]`, PayloadLimits{MaxDepth: 3}, ErrTooDeep, ""},
		{"too deep unterminated", strings.Repeat("[", 1<<20), PayloadLimits{MaxBytes: 2 << 20}, ErrTooDeep, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			out, hash, err := Canonicalize(in, tc.lim)
			checkPayloadError(t, in, err, tc.want)
			if out != nil || hash != "" {
				t.Errorf("on error, got canonical %q and hash %q; want nil and empty", out, hash)
			}
			if err != nil && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("message %q does not contain %q", err, tc.msg)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "payload: ") {
				t.Errorf("message %q does not start with %q", err, "payload: ")
			}
		})
	}
}

// TestHashErrorPrecedence pins which problem is reported when a payload has
// several: limits first (they are cheap and protect the parser), then syntax,
// then lossy numbers.
func TestHashErrorPrecedence(t *testing.T) {
	for _, tc := range []struct {
		in   string
		lim  PayloadLimits
		want error
	}{
		{`[9007199254740993, x]`, PayloadLimits{}, ErrInvalidJSON},
		{`[9007199254740993, {"a":1,"a":2}]`, PayloadLimits{}, ErrDuplicateKey},
		{`[[9007199254740993]]`, PayloadLimits{MaxDepth: 1}, ErrTooDeep},
		{`[[x`, PayloadLimits{MaxDepth: 1}, ErrTooDeep},
		{`[[1]]`, PayloadLimits{MaxBytes: 4, MaxDepth: 1}, ErrPayloadTooLarge},
	} {
		_, _, err := Canonicalize([]byte(tc.in), tc.lim)
		checkPayloadError(t, []byte(tc.in), err, tc.want)
	}
}

func TestHashLimits(t *testing.T) {
	t.Run("bytes", func(t *testing.T) {
		in := []byte(`"0123456789"`) // 12 bytes
		if _, _, err := Canonicalize(in, PayloadLimits{MaxBytes: 12}); err != nil {
			t.Errorf("exactly MaxBytes: %v", err)
		}
		_, _, err := Canonicalize(in, PayloadLimits{MaxBytes: 11})
		checkPayloadError(t, in, err, ErrPayloadTooLarge)

		big := bytes.Repeat([]byte(" "), DefaultMaxPayloadBytes)
		big[0] = '1'
		if _, _, err := Canonicalize(big, PayloadLimits{}); err != nil {
			t.Errorf("exactly DefaultMaxPayloadBytes: %v", err)
		}
		big = append(big, ' ')
		_, _, err = Canonicalize(big, PayloadLimits{})
		checkPayloadError(t, nil, err, ErrPayloadTooLarge)
		if err != nil && !strings.Contains(err.Error(), "limit of 1048576 bytes") {
			t.Errorf("message %q does not name the default limit", err)
		}
	})
	t.Run("depth", func(t *testing.T) {
		arrays := func(d int) string { return strings.Repeat("[", d) + strings.Repeat("]", d) }
		objects := func(d int) string {
			return strings.Repeat(`{"k":`, d) + "0" + strings.Repeat("}", d)
		}
		for _, maxDepth := range []int{1, 2, 5, DefaultMaxDepth, 200} {
			lim := PayloadLimits{MaxDepth: maxDepth}
			if maxDepth == DefaultMaxDepth {
				lim = PayloadLimits{} // the default
			}
			for _, gen := range []func(int) string{arrays, objects} {
				ok := gen(maxDepth)
				if _, _, err := Canonicalize([]byte(ok), lim); err != nil {
					t.Errorf("depth %d with MaxDepth %d: %v", maxDepth, maxDepth, err)
				}
				deep := gen(maxDepth + 1)
				_, _, err := Canonicalize([]byte(deep), lim)
				checkPayloadError(t, []byte(deep), err, ErrTooDeep)
			}
		}
		// A scalar has depth 0, so it passes even the smallest limit.
		if _, _, err := Canonicalize([]byte(`"x"`), PayloadLimits{MaxDepth: 1}); err != nil {
			t.Errorf("scalar with MaxDepth 1: %v", err)
		}
		// Brackets inside strings do not count.
		if _, _, err := Canonicalize([]byte(`["[[[{{{\"\\"]`), PayloadLimits{MaxDepth: 1}); err != nil {
			t.Errorf("brackets in strings: %v", err)
		}
		// Above the parser's hard limit the limit is clamped, still ErrTooDeep.
		lim := PayloadLimits{MaxDepth: 50000, MaxBytes: 1 << 20}
		if _, _, err := Canonicalize([]byte(arrays(maxSupportedDepth)), lim); err != nil {
			t.Errorf("depth %d with MaxDepth 50000: %v", maxSupportedDepth, err)
		}
		deep := arrays(maxSupportedDepth + 1)
		_, _, err := Canonicalize([]byte(deep), lim)
		checkPayloadError(t, []byte(deep), err, ErrTooDeep)
	})
}

// TestHashDoesNotModifyInput checks that raw is left alone even when it has
// spare capacity that an append could write into.
func TestHashDoesNotModifyInput(t *testing.T) {
	for _, in := range []string{
		`{"b":[1E30, "\u20ac"], "a":  0.5}`, // canonical form longer in places
		`1e20`,                              // canonical form much longer
		`{"a":1,"a":2}`,                     // error path
		`[9007199254740993]`,                // lossy, via the reference path
		rfc8785Sample,
	} {
		buf := make([]byte, len(in), len(in)+64)
		copy(buf, in)
		full := buf[:cap(buf)]
		for i := len(in); i < len(full); i++ {
			full[i] = '#'
		}
		snapshot := bytes.Clone(full)
		Canonicalize(buf, PayloadLimits{})
		referenceCanonicalize(buf, DefaultMaxDepth)
		if !bytes.Equal(full, snapshot) {
			t.Errorf("Canonicalize(%q) modified its input or the memory past it", in)
		}
	}
}

func TestHashCanonicalAndValidHash(t *testing.T) {
	empty := sha256.Sum256(nil)
	if got, want := HashCanonical(nil), HashPrefix+hex.EncodeToString(empty[:]); got != want {
		t.Errorf("HashCanonical(nil) = %s, want %s", got, want)
	}
	if got := HashCanonical([]byte("{}")); got != "jcs-sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" {
		t.Errorf("HashCanonical({}) = %s", got)
	}
	_, h, err := Canonicalize([]byte(" { } "), PayloadLimits{})
	if err != nil || h != HashCanonical([]byte("{}")) {
		t.Errorf("Canonicalize(\" { } \") hash = %s, %v", h, err)
	}

	valid := HashCanonical([]byte("x"))
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{valid, true},
		{HashPrefix + strings.Repeat("0", 64), true},
		{HashPrefix + strings.Repeat("f", 64), true},
		{"", false},
		{HashPrefix, false},
		{strings.TrimPrefix(valid, HashPrefix), false},
		{HashPrefix + strings.Repeat("0", 63), false},
		{HashPrefix + strings.Repeat("0", 65), false},
		{HashPrefix + strings.Repeat("F", 64), false},
		{HashPrefix + strings.Repeat("g", 64), false},
		{"JCS-SHA256:" + strings.Repeat("0", 64), false},
		{"sha256:" + strings.Repeat("0", 64), false},
		{" " + valid, false},
		{valid + "\n", false},
	} {
		if got := ValidHash(tc.s); got != tc.want {
			t.Errorf("ValidHash(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

// TestHashFastMatchesReference runs every input used in this file through
// both the single-pass canonicaliser and the jsontext-based reference and
// requires them to agree (see checkFastMatchesReference).
func TestHashFastMatchesReference(t *testing.T) {
	for _, in := range hashSeedCorpus() {
		checkFastMatchesReference(t, []byte(in))
	}
}

// TestHashReferenceIsValueCanonicalize confirms that the reference path's
// jsontext.AppendFormat call, which avoids copying the input, behaves exactly
// like the documented jsontext.Value.Canonicalize on a copy.
func TestHashReferenceIsValueCanonicalize(t *testing.T) {
	for _, in := range hashSeedCorpus() {
		v := jsontext.Value(in) // a copy, as the conversion from string copies
		errV := v.Canonicalize()
		got, errA := jsontext.AppendFormat(nil, []byte(in),
			jsontext.CanonicalizeRawInts(true), jsontext.CanonicalizeRawFloats(true),
			jsontext.ReorderRawObjects(true))
		if (errV == nil) != (errA == nil) || errV == nil && !bytes.Equal(v, got) {
			t.Errorf("%q: Value.Canonicalize = %q, %v; AppendFormat = %q, %v", in, v, errV, got, errA)
		}
	}
}

// checkFastMatchesReference requires fastCanonicalize to accept exactly what
// referenceCanonicalize accepts, with identical output. If the fast path
// declined valid input only performance would suffer, but if it accepted
// invalid input or produced different bytes, hashes would be wrong.
func checkFastMatchesReference(t hashFataler, in []byte) {
	t.Helper()
	fast, ok := fastCanonicalize(in, DefaultMaxDepth)
	ref, err := referenceCanonicalize(in, DefaultMaxDepth)
	switch {
	case ok && err != nil:
		t.Fatalf("fast path accepted %q as %q, reference refused: %v", in, fast, err)
	case !ok && err == nil:
		t.Fatalf("fast path declined %q, reference accepted it as %q", in, ref)
	case ok && !bytes.Equal(fast, ref):
		t.Fatalf("canonical forms of %q differ:\n fast %q\n  ref %q", in, fast, ref)
	}
}

// hashSeedCorpus returns interesting payloads, valid and not, for the
// differential test and as fuzzing seeds.
func hashSeedCorpus() []string {
	corpus := []string{
		rfc8785Sample,
		strings.Replace(rfc8785Sample, "333333333.33333329", "333333333.3333333", 1),
		`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
		`{"a":1,"\u0061":2}`, `{"a":1,"a":2}`, `{"b":1,"a":2,"b":3}`,
		`"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud83d\ude00"`, `"\uD83D\uDE00"`,
		"\"a\xffb\"", "\"\xed\xa0\x80\"", "[\xff]", "\"\xe2\x82",
		``, ` `, `[1,]`, `{"a":1}x`, `1 2`, `01`, `-`, `1.`, `1e`, `1e+`, `-0`, `.5`,
		`9007199254740993`, `0.30000000000000001`, `1e400`, `1e-400`, `5e-324`,
		`123456789012345678901234567890`, `1.0`, `1e2`, `1E+2`, `100.000`, `12.34`,
		`[1e20,1e21,1e-6,1e-7,0.1,-0.0]`, `{"a":[{"b":[[{"c":{}}]]}]}`,
		`"\u0000\u001f\u007f\b\f\n\r\t\/\"\\"`, `true`, `false`, `null`, `tru`, `nul`,
		"{\"\U0010FFFF\":1,\"\uFFFF\":2,\"\uE000\":3,\"\U00010000\":4}",
		`{"é":1,"e":2,"f":3,"ê":4}`,
		string(benchPayloadSmall()),
	}
	for _, n := range []string{"0", "-0", "1", "-1", "0.5", "1e2", "4.50", "2e-3", "1e+30",
		"9007199254740992", "333333333.3333333", "1.7976931348623157e308"} {
		corpus = append(corpus, n, "["+n+"]", `{"n":`+n+`}`)
	}
	return corpus
}

// jcsRatOf returns the exact value of a JSON number literal.
func jcsRatOf(t hashFataler, lit string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		t.Fatalf("big.Rat cannot parse %q", lit)
	}
	return r
}

// TestHashNumberRuleMatchesBigRat checks the number rule against an
// independent formulation using big.Rat on a grid of literals around the
// float64 limits and the 15/16/17-digit boundary.
func TestHashNumberRuleMatchesBigRat(t *testing.T) {
	var lits []string
	mantissas := []string{"1", "5", "9", "12.34", "0.1", "4.9406564584124654", "2.2250738585072014",
		"1.7976931348623157", "1.7976931348623158", "9.99999999999999", "999999999999999",
		"9007199254740993", "1.00000000000000001", "3.33333333333333314830"}
	for _, m := range mantissas {
		for _, e := range []int{-330, -324, -323, -308, -307, -300, -22, -7, -6, -1, 0, 1, 15, 20, 21, 22, 300, 307, 308, 309} {
			lits = append(lits, m+"e"+strconv.Itoa(e), "-"+m+"e"+strconv.Itoa(e))
		}
	}
	for _, lit := range lits {
		want := referenceNumberExact(t, lit)
		in := []byte(lit)
		_, _, err := Canonicalize(in, PayloadLimits{})
		if want && err != nil {
			t.Errorf("%s: exact by big.Rat, but refused: %v", lit, err)
		}
		if !want {
			checkPayloadError(t, in, err, ErrLossyNumber)
		}
		checkFastMatchesReference(t, in)
	}
}

// referenceNumberExact decides the number rule with big.Rat: the literal is
// exact if the RFC 8785 text of the nearest float64 (with overflow clamped as
// jsontext does) has the same value.
func referenceNumberExact(t hashFataler, lit string) bool {
	t.Helper()
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		t.Fatalf("ParseFloat(%q): %v", lit, err)
	}
	if math.IsInf(f, 0) {
		return false // clamped to ±MaxFloat64, which is a different value
	}
	canon := string(jsontext.AppendFloat(nil, f, 64))
	return jcsRatOf(t, canon).Cmp(jcsRatOf(t, lit)) == 0
}

// jcsTestValue is a JSON value model for the property tests, rendered to text
// in many equivalent ways and canonicalised independently of the code under
// test.
type jcsTestValue struct {
	kind  byte // 'n'ull, 'b'ool, '#' number, 's'tring, 'a'rray, 'o'bject
	b     bool
	mant  int64 // a number is mant × 10^exp
	exp   int
	s     string
	elems []jcsTestValue
	keys  []string // object member names, distinct, in insertion order
}

// jcsDrawRune draws runes that exercise escaping and UTF-16 ordering: quotes,
// backslashes, control characters, the U+E000..U+FFFF range and the
// supplementary planes.
func jcsDrawRune(t *rapid.T) rune {
	switch rapid.IntRange(0, 4).Draw(t, "runeClass") {
	case 0:
		return rapid.SampledFrom([]rune{'"', '\\', '/', '\b', '\f', '\n', '\r', '\t', 0, 0x1f, 0x7f,
			0x80, 0xe9, 0x2028, 0x20ac, 0xd7ff, 0xe000, 0xfb33, 0xfeff, 0xfffd, 0xffff,
			0x10000, 0x1f600, 0x10ffff}).Draw(t, "special")
	case 1:
		return rapid.Int32Range(0x20, 0x7e).Draw(t, "ascii")
	case 2:
		return rapid.Int32Range(0, 0x1f).Draw(t, "control")
	case 3:
		r := rapid.Int32Range(0x80, 0xfffd).Draw(t, "bmp")
		if utf16.IsSurrogate(r) {
			r += 0x800
		}
		return r
	default:
		return rapid.Int32Range(0x10000, 0x10ffff).Draw(t, "astral")
	}
}

func jcsDrawString(t *rapid.T, maxLen int) string {
	n := rapid.IntRange(0, maxLen).Draw(t, "strLen")
	var b strings.Builder
	for range n {
		b.WriteRune(jcsDrawRune(t))
	}
	return b.String()
}

// jcsDrawNumber draws exact numbers: up to 15 significant digits with a modest
// exponent, or safe integers of up to 16 digits (|n| <= 2^53).
func jcsDrawNumber(t *rapid.T) jcsTestValue {
	if rapid.Bool().Draw(t, "safeInt") {
		return jcsTestValue{kind: '#', mant: rapid.Int64Range(-1<<53, 1<<53).Draw(t, "int")}
	}
	const max15 = 999_999_999_999_999
	mant := rapid.OneOf(rapid.Int64Range(-max15, max15), rapid.Int64Range(-1000, 1000)).Draw(t, "mant")
	return jcsTestValue{kind: '#', mant: mant, exp: rapid.IntRange(-30, 30).Draw(t, "exp")}
}

func jcsDrawValue(t *rapid.T, depth int) jcsTestValue {
	// Mostly containers near the top, so that typical draws are documents
	// with some structure rather than lone scalars.
	kinds := []byte("nb#s")
	switch {
	case depth == 0:
		kinds = []byte("aooo#s")
	case depth < 4:
		kinds = append(kinds, 'a', 'o')
	}
	switch k := rapid.SampledFrom(kinds).Draw(t, "kind"); k {
	case 'n':
		return jcsTestValue{kind: 'n'}
	case 'b':
		return jcsTestValue{kind: 'b', b: rapid.Bool().Draw(t, "bool")}
	case '#':
		return jcsDrawNumber(t)
	case 's':
		return jcsTestValue{kind: 's', s: jcsDrawString(t, 8)}
	case 'a':
		v := jcsTestValue{kind: 'a'}
		for range rapid.IntRange(0, 4).Draw(t, "arrayLen") {
			v.elems = append(v.elems, jcsDrawValue(t, depth+1))
		}
		return v
	default:
		v := jcsTestValue{kind: 'o'}
		for range rapid.IntRange(0, 5).Draw(t, "objectLen") {
			key := jcsDrawString(t, 3)
			if slices.Contains(v.keys, key) {
				continue
			}
			v.keys = append(v.keys, key)
			v.elems = append(v.elems, jcsDrawValue(t, depth+1))
		}
		return v
	}
}

// jcsModelCanonical writes v as RFC 8785 prescribes, independently of the
// code under test: names sorted by UTF-16 code units via utf16.Encode,
// numbers via strconv.ParseFloat and jsontext.AppendFloat, strings escaped
// per section 3.2.2.2.
func jcsModelCanonical(b []byte, v jcsTestValue) []byte {
	switch v.kind {
	case 'n':
		return append(b, "null"...)
	case 'b':
		return strconv.AppendBool(b, v.b)
	case '#':
		f, err := strconv.ParseFloat(strconv.FormatInt(v.mant, 10)+"e"+strconv.Itoa(v.exp), 64)
		if err != nil {
			panic(err)
		}
		if f == 0 {
			return append(b, '0')
		}
		return jsontext.AppendFloat(b, f, 64)
	case 's':
		return jcsModelString(b, v.s)
	case 'a':
		b = append(b, '[')
		for i, e := range v.elems {
			if i > 0 {
				b = append(b, ',')
			}
			b = jcsModelCanonical(b, e)
		}
		return append(b, ']')
	default:
		order := make([]int, len(v.keys))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(i, j int) int {
			return slices.Compare(utf16.Encode([]rune(v.keys[i])), utf16.Encode([]rune(v.keys[j])))
		})
		b = append(b, '{')
		for n, i := range order {
			if n > 0 {
				b = append(b, ',')
			}
			b = jcsModelString(b, v.keys[i])
			b = append(b, ':')
			b = jcsModelCanonical(b, v.elems[i])
		}
		return append(b, '}')
	}
}

func jcsModelString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\b':
			b = append(b, `\b`...)
		case r == '\f':
			b = append(b, `\f`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r < 0x20:
			b = append(b, fmt.Sprintf(`\u%04x`, r)...)
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

// jcsRender writes v as JSON text, drawing every free choice (whitespace,
// member order, escapes, number spelling) from t, so each call may give a
// different but equivalent text.
func jcsRender(t *rapid.T, b []byte, v jcsTestValue) []byte {
	space := func(b []byte) []byte {
		return append(b, rapid.SampledFrom([]string{"", "", " ", "\n", "\t", "\r\n  "}).Draw(t, "space")...)
	}
	b = space(b)
	switch v.kind {
	case 'n':
		b = append(b, "null"...)
	case 'b':
		b = strconv.AppendBool(b, v.b)
	case '#':
		b = jcsRenderNumber(t, b, v.mant, v.exp)
	case 's':
		b = jcsRenderString(t, b, v.s)
	case 'a':
		b = append(b, '[')
		for i, e := range v.elems {
			if i > 0 {
				b = append(space(b), ',')
			}
			b = jcsRender(t, b, e)
		}
		b = append(space(b), ']')
	default:
		order := make([]int, len(v.keys))
		for i := range order {
			order[i] = i
		}
		order = rapid.Permutation(order).Draw(t, "memberOrder")
		b = append(b, '{')
		for n, i := range order {
			if n > 0 {
				b = append(space(b), ',')
			}
			b = jcsRenderString(t, space(b), v.keys[i])
			b = append(space(b), ':')
			b = jcsRender(t, b, v.elems[i])
		}
		b = append(space(b), '}')
	}
	return space(b)
}

// jcsRenderNumber writes mant × 10^exp in one of several equivalent spellings.
func jcsRenderNumber(t *rapid.T, b []byte, mant int64, exp int) []byte {
	if mant < 0 {
		b = append(b, '-')
		mant = -mant
	} else if mant == 0 && rapid.Bool().Draw(t, "negZero") {
		b = append(b, '-')
	}
	digits := strconv.FormatInt(mant, 10)
	// Optionally pad with trailing zeros, compensating in the exponent.
	pad := rapid.IntRange(0, 3).Draw(t, "pad")
	if mant != 0 {
		digits += strings.Repeat("0", pad)
		exp -= pad
	}
	expPart := func(e int) string {
		sep := rapid.SampledFrom([]string{"e", "E"}).Draw(t, "e")
		if e >= 0 && rapid.Bool().Draw(t, "plus") {
			sep += "+"
		}
		return sep + strconv.Itoa(e)
	}
	switch rapid.IntRange(0, 2).Draw(t, "numberStyle") {
	case 0: // integer digits with an exponent: 1234e-2
		if exp == 0 && rapid.Bool().Draw(t, "noExp") {
			return append(b, digits...)
		}
		return append(b, digits+expPart(exp)...)
	case 1: // scientific: 1.234e1
		s := digits[:1]
		if len(digits) > 1 {
			s += "." + digits[1:]
		}
		return append(b, s+expPart(exp+len(digits)-1)...)
	default: // positional, if the exponent is small: 12.34, 1200, 0.0012
		switch {
		case mant == 0:
			return append(b, "0"+rapid.SampledFrom([]string{"", ".0", ".000"}).Draw(t, "zeroFrac")...)
		case exp >= 0 && exp <= 25:
			return append(b, digits+strings.Repeat("0", exp)...)
		case exp < 0 && -exp < len(digits):
			return append(b, digits[:len(digits)+exp]+"."+digits[len(digits)+exp:]...)
		case exp < 0 && -exp-len(digits) <= 25:
			return append(b, "0."+strings.Repeat("0", -exp-len(digits))+digits...)
		default:
			return append(b, digits+expPart(exp)...)
		}
	}
}

// jcsRenderString writes s with each character randomly escaped or not (where
// JSON allows both), using \u escapes in either case and surrogate pairs.
func jcsRenderString(t *rapid.T, b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		mustEscape := r < 0x20 || r == '"' || r == '\\'
		style := rapid.IntRange(0, 3).Draw(t, "escape")
		if !mustEscape && style < 2 {
			b = utf8.AppendRune(b, r)
			continue
		}
		if short := map[rune]string{'"': `\"`, '\\': `\\`, '/': `\/`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}[r]; short != "" && style != 3 {
			b = append(b, short...)
			continue
		}
		format := `\u%04x`
		if rapid.Bool().Draw(t, "upperHex") {
			format = `\u%04X`
		}
		for _, unit := range utf16.Encode([]rune{r}) {
			b = append(b, fmt.Sprintf(format, unit)...)
		}
	}
	return append(b, '"')
}

// TestHashPropertyRenderingsAgree: every rendering of a value canonicalises
// to the model's canonical form, so all renderings share one hash, and
// canonicalising the canonical form changes nothing.
func TestHashPropertyRenderingsAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := jcsDrawValue(t, 0)
		want := string(jcsModelCanonical(nil, v))
		var firstHash string
		for i := range 3 {
			text := jcsRender(t, nil, v)
			got, hash, err := Canonicalize(text, PayloadLimits{})
			if err != nil {
				t.Fatalf("rendering %d %q: %v", i, text, err)
			}
			if string(got) != want {
				t.Fatalf("rendering %d %q:\n got %q\nwant %q", i, text, got, want)
			}
			if i == 0 {
				firstHash = hash
			} else if hash != firstHash {
				t.Fatalf("rendering %d hashes to %s, rendering 0 to %s", i, hash, firstHash)
			}
			checkFastMatchesReference(t, text)
		}
		again, hash, err := Canonicalize([]byte(want), PayloadLimits{})
		if err != nil || string(again) != want || hash != firstHash {
			t.Fatalf("canonicalising the canonical form %q gave %q, %s, %v", want, again, hash, err)
		}
	})
}

// jcsMutate returns a copy of v with exactly one leaf (or one empty container)
// changed to a different value.
func jcsMutate(t *rapid.T, v jcsTestValue) jcsTestValue {
	switch v.kind {
	case 'n':
		return jcsTestValue{kind: 'b', b: rapid.Bool().Draw(t, "nullTo")}
	case 'b':
		v.b = !v.b
	case '#':
		if v.mant == 1<<53 {
			v.mant--
		} else {
			v.mant++
		}
	case 's':
		v.s += string(jcsDrawRune(t))
	case 'a', 'o':
		if len(v.elems) == 0 {
			v.elems = []jcsTestValue{{kind: 'n'}}
			if v.kind == 'o' {
				v.keys = []string{jcsDrawString(t, 2)}
			}
			return v
		}
		i := rapid.IntRange(0, len(v.elems)-1).Draw(t, "mutateAt")
		v.elems = slices.Clone(v.elems)
		v.elems[i] = jcsMutate(t, v.elems[i])
	}
	return v
}

// TestHashPropertyLeafChangeChangesHash: values that differ in one leaf have
// different canonical forms and hashes.
func TestHashPropertyLeafChangeChangesHash(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := jcsDrawValue(t, 0)
		w := jcsMutate(t, v)
		a, ha, err := Canonicalize(jcsRender(t, nil, v), PayloadLimits{})
		if err != nil {
			t.Fatal(err)
		}
		b, hb, err := Canonicalize(jcsRender(t, nil, w), PayloadLimits{})
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(a, b) || ha == hb {
			t.Fatalf("different values share canonical form %q / hash %s", a, ha)
		}
	})
}

// TestHashPropertyNumberRule checks the lossy-number rule (and the
// single-pass formatting) against big.Rat on random literals of 1 to 20
// significant digits with exponents across the whole float64 range.
func TestHashPropertyNumberRule(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		digits := rapid.StringMatching(`0|[1-9][0-9]{0,19}`).Draw(t, "digits")
		exp := rapid.OneOf(rapid.IntRange(-30, 30), rapid.IntRange(-340, 320)).Draw(t, "exp")
		lit := digits + "e" + strconv.Itoa(exp)
		if rapid.Bool().Draw(t, "neg") {
			lit = "-" + lit
		}
		want := referenceNumberExact(t, lit)
		out, _, err := Canonicalize([]byte(lit), PayloadLimits{})
		switch {
		case want && err != nil:
			t.Fatalf("%s: exact by big.Rat, but refused: %v", lit, err)
		case !want && !errors.Is(err, ErrLossyNumber):
			t.Fatalf("%s: lossy by big.Rat, but got %q, %v", lit, out, err)
		case want:
			f, _ := strconv.ParseFloat(lit, 64)
			want := string(jsontext.AppendFloat(nil, f, 64))
			if f == 0 {
				want = "0" // AppendFloat keeps the sign of -0; RFC 8785 does not
			}
			if string(out) != want {
				t.Fatalf("%s: canonical %s, want %s", lit, out, want)
			}
		}
		checkFastMatchesReference(t, []byte(lit))
	})
}

// TestHashPropertyCorruptedInputsAgree corrupts renderings of valid values
// by one byte (deleted, replaced or inserted) to produce nearly-valid input,
// where the single-pass canonicaliser and the reference are most likely to
// disagree, and checks that they do not, and that errors are well formed.
func TestHashPropertyCorruptedInputsAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		text := jcsRender(t, nil, jcsDrawValue(t, 0))
		if len(text) == 0 {
			return
		}
		i := rapid.IntRange(0, len(text)-1).Draw(t, "at")
		interesting := []byte("\"\\{}[]:,.-+eE0159uDdc \xff\xc3\xed\x00\n")
		switch rapid.IntRange(0, 2).Draw(t, "corruption") {
		case 0:
			text = slices.Delete(text, i, i+1)
		case 1:
			text[i] = rapid.SampledFrom(interesting).Draw(t, "replacement")
		default:
			text = slices.Insert(text, i, rapid.SampledFrom(interesting).Draw(t, "insertion"))
		}
		checkFastMatchesReference(t, text)
		if _, _, err := Canonicalize(text, PayloadLimits{}); err != nil {
			n := 0
			for _, s := range payloadSentinels {
				if errors.Is(err, s) {
					n++
				}
			}
			if n != 1 || strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("%q: malformed error %q", text, err)
			}
		}
	})
}
