package recovery

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
)

// scanClasses are the classes the generated inputs use (one more is unknown).
var scanClasses = map[string]classInfo{"demo.transfer": {sqlEffect: true}, "demo.refund": {sqlEffect: true}}

// scanInputLines is an input of n lines over a few identities: repeats,
// the same identity with other payloads or another class, identities and
// payloads spelled with escapes, other key orders and spacing, invalid
// lines, an unknown class and blank lines.
func scanInputLines(rng *rand.Rand, n, identities int) []string {
	esc := func(s string) string { // the same string, every letter escaped
		var b strings.Builder
		for _, r := range s {
			if r >= 'a' && r <= 'z' && rng.IntN(2) == 0 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	lines := make([]string, 0, n)
	for range n {
		k := rng.IntN(identities)
		tenant, op := fmt.Sprintf("t%d", k%7), fmt.Sprintf("op-%d", k)
		if rng.IntN(3) == 0 {
			tenant, op = esc(tenant), esc(op)
		}
		class := "demo.transfer"
		if rng.IntN(12) == 0 {
			class = "demo.refund"
		}
		amount := k
		if rng.IntN(6) == 0 {
			amount = k + 1 + rng.IntN(2)
		}
		payload := fmt.Sprintf(`{"amount":%d,"currency":"EUR"}`, amount)
		if rng.IntN(2) == 0 {
			payload = fmt.Sprintf(`{ "currency" : "\u0045UR", "amount" : %de0 }`, amount)
		}
		switch rng.IntN(40) {
		case 0:
			lines = append(lines, `not json`)
		case 1:
			lines = append(lines, "")
		case 2:
			lines = append(lines, fmt.Sprintf(`{"tenant":"%s","operation_id":"%s","class":"no.such","payload":%s}`, tenant, op, payload))
		case 3:
			lines = append(lines, fmt.Sprintf(`{"tenant":"%s","operation_id":"%s","class":"%s"}`, tenant, op, class))
		default:
			lines = append(lines, fmt.Sprintf(`  {"tenant":"%s","operation_id":"%s","class":"%s","payload":%s}`, tenant, op, class, payload))
		}
	}
	return lines
}

// refPayloads is the plain-map model of inputPayloads: exact identities, the
// whole canonical hash.
type refPayloads map[string][]refPayload

type refPayload struct {
	hash, class string
	line        int
}

func newRefPayloads(t *testing.T, lines []string) refPayloads {
	ref := refPayloads{}
	var p lineParser
	for i, text := range lines {
		if strings.TrimSpace(text) == "" {
			continue
		}
		req, err := p.parse([]byte(strings.TrimSpace(text)))
		if err != nil {
			continue
		}
		prep, err := prepare(req, idem.PayloadLimits{})
		if _, known := scanClasses[req.Class]; err != nil || !known {
			continue
		}
		key := collisionKey(prep.TenantID, prep.OperationID)
		found := false
		for _, pl := range ref[key] {
			found = found || (pl.hash == prep.Hash && pl.class == prep.Class)
		}
		if !found {
			ref[key] = append(ref[key], refPayload{hash: prep.Hash, class: prep.Class, line: i + 1})
		}
	}
	return ref
}

func (ref refPayloads) other(tenant, op, hash, class string) int {
	line := 0
	for _, pl := range ref[collisionKey(tenant, op)] {
		if (pl.hash != hash || pl.class != class) && (line == 0 || pl.line < line) {
			line = pl.line
		}
	}
	return line
}

// plainSource is an input that is no NDJSON reader: the scan reads lines
// again by reading it from its start.
type plainSource struct{ nd *ndjson }

func (s plainSource) Next() (Item, error) { return s.nd.Next() }
func (s plainSource) Rewind() error       { return s.nd.Rewind() }

// seekOnly can seek but not be read at an offset.
type seekOnly struct{ r *strings.Reader }

func (s seekOnly) Read(p []byte) (int, error)                { return s.r.Read(p) }
func (s seekOnly) Seek(off int64, whence int) (int64, error) { return s.r.Seek(off, whence) }
func forcedCollision(seed maphash.Seed, tenant, op string) uint64 {
	return identityKey(seed, tenant, op) % 5
}
func highCollision(seed maphash.Seed, tenant, op string) uint64 {
	return identityKey(seed, tenant, op)%3<<62 | 1
}

// TestScanIndexAgainstMaps: for every valid line of generated inputs, the
// scan's sorted entries answer what a plain map of exact identities answers
// (the first line holding the identity with another payload), whether
// identities share hashes or not, read again at an offset or from the start.
func TestScanIndexAgainstMaps(t *testing.T) {
	t.Parallel()
	hashes := map[string]func(maphash.Seed, string, string) uint64{"seeded": identityKey, "forced collisions": forcedCollision, "top bits": highCollision}
	sources := map[string]func(string) Source{
		"ndjson":    func(s string) Source { return NDJSON(strings.NewReader(s), 1<<20) },
		"plain":     func(s string) Source { return plainSource{NDJSON(strings.NewReader(s), 1<<20).(*ndjson)} },
		"seek only": func(s string) Source { return NDJSON(seekOnly{strings.NewReader(s)}, 1<<20) },
	}
	for round := range 12 {
		rng := rand.New(rand.NewPCG(uint64(round), 7))
		lines := scanInputLines(rng, 50+rng.IntN(600), 5+rng.IntN(200))
		input := strings.Join(lines, "\n")
		ref := newRefPayloads(t, lines)
		for hname, hash := range hashes {
			for sname, source := range sources {
				t.Run(fmt.Sprintf("%d/%s/%s", round, hname, sname), func(t *testing.T) {
					r := &Resolver{idHash: hash}
					src := source(input)
					in, err := r.scanInput(context.Background(), src, scanClasses, maphash.MakeSeed())
					require.NoError(t, err)
					defer in.release()
					if hname != "seeded" && len(ref) > 5 {
						assert.NotEmpty(t, in.collided, "identities share hashes")
					}
					var p lineParser
					checked := 0
					for i, text := range lines {
						req, err := p.parse([]byte(strings.TrimSpace(text)))
						if err != nil {
							continue
						}
						prep, err := prepare(req, idem.PayloadLimits{})
						if err != nil {
							continue
						}
						for _, class := range []string{"demo.transfer", "demo.refund", req.Class} {
							want := ref.other(prep.TenantID, prep.OperationID, prep.Hash, class)
							assert.Equal(t, want, in.other(prep.TenantID, prep.OperationID, prep.Hash, class), "line %d %s as %s", i+1, text, class)
						}
						checked++
					}
					assert.Positive(t, checked)
					// The source was rewound: it reads from its first line.
					it, err := src.Next()
					if err != io.EOF {
						require.NoError(t, err)
						assert.LessOrEqual(t, it.Line, 2)
					}
				})
			}
		}
	}
}

// refIdentities is the plain-map model of runIdentities.
type refIdentities map[string]firstLine

func (m refIdentities) settle(res *Result) {
	if res.Outcome != WouldApply && res.Outcome != WouldRedrive {
		return
	}
	key, h := collisionKey(res.Tenant, res.OperationID), hashPrefix(res.IncomingHash)
	first, ok := m[key]
	switch {
	case !ok:
		m[key] = firstLine{hash: h, line: uint32(res.Line)}
	case first.hash == h:
		res.Outcome, res.StoredHash, res.Conditional = AlreadyApplied, res.IncomingHash, true
		res.Note = fmt.Sprintf("same identity and payload as line %d of this input, which a real run applies first (if its effect refuses, this line's refuses too: error)", first.line)
	default:
		res.Outcome = WouldConflict
		res.Note = fmt.Sprintf("line %d of this input has this identity with another payload: a real run applies that line and quarantines this one", first.line)
	}
}

// TestRunIdentitiesAgainstMap: a dry run's memory of its would_apply lines,
// kept in the scan's entries, settles every answer as a plain map of exact
// identities does: over the input's own lines in order, with some answered
// otherwise (error, conflict) and, as if the input had changed since the
// scan, lines of other payloads and of identities the scan never saw.
func TestRunIdentitiesAgainstMap(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		rng := rand.New(rand.NewPCG(uint64(round), 9))
		lines := scanInputLines(rng, 50+rng.IntN(600), 5+rng.IntN(200))
		for hname, hash := range map[string]func(maphash.Seed, string, string) uint64{"seeded": identityKey, "forced collisions": forcedCollision} {
			t.Run(fmt.Sprintf("%d/%s", round, hname), func(t *testing.T) {
				r := &Resolver{idHash: hash}
				in, err := r.scanInput(context.Background(), NDJSON(strings.NewReader(strings.Join(lines, "\n")), 1<<20), scanClasses, maphash.MakeSeed())
				require.NoError(t, err)
				defer in.release()
				seen, ref := newRunIdentities(in), refIdentities{}
				var p lineParser
				for i, text := range lines {
					req, err := p.parse([]byte(strings.TrimSpace(text)))
					if err != nil {
						continue
					}
					if rng.IntN(8) == 0 {
						req.OperationID += "-unscanned"
					}
					if rng.IntN(8) == 0 {
						req.Payload = []byte(`{"changed":true}`)
					}
					prep, err := prepare(req, idem.PayloadLimits{})
					if err != nil {
						continue
					}
					res := Result{Line: i + 1, Tenant: prep.TenantID, OperationID: prep.OperationID, Class: prep.Class, IncomingHash: prep.Hash}
					switch rng.IntN(10) {
					case 0:
						res.Outcome = Failed
					case 1:
						res.Outcome = WouldRedrive
					case 2:
						res.Outcome = Conflict
					default:
						res.Outcome = WouldApply
					}
					got, want := res, res
					seen.settle(&got)
					ref.settle(&want)
					require.Equal(t, want, got, "line %d: %s", i+1, text)
				}
			})
		}
	}
}

// changingReader reads one text in sequence and another at an offset: a
// file rewritten between the scan's reading and its reading again.
type changingReader struct {
	*strings.Reader
	later *strings.Reader
}

func (c changingReader) ReadAt(p []byte, off int64) (int, error) { return c.later.ReadAt(p, off) }

// TestScanRefusesAnInputThatChanged: a line read again (its hash shared by
// another line) that holds another identity than it did ends the scan with
// an error, not with answers about an input that is no more.
func TestScanRefusesAnInputThatChanged(t *testing.T) {
	t.Parallel()
	a := `{"tenant":"t","operation_id":"a","class":"demo.transfer","payload":{}}`
	b := `{"tenant":"t","operation_id":"b","class":"demo.transfer","payload":{}}`
	src := NDJSON(changingReader{strings.NewReader(a + "\n" + a + "\n"), strings.NewReader(a + "\n" + b + "\n")}, 1<<20)
	r := &Resolver{}
	in, err := r.scanInput(context.Background(), src, scanClasses, maphash.MakeSeed())
	assert.Nil(t, in)
	require.Error(t, err)
	assert.True(t, errors.Is(err, errInputChanged), err.Error())
}

// TestBulkGrowsAndReleases: entries pushed past several doublings are all
// kept, and released memory is gone.
func TestBulkGrowsAndReleases(t *testing.T) {
	t.Parallel()
	var b bulk[scanEntry]
	for i := range 100_000 {
		b.push(scanEntry{id: uint64(i), line: uint32(i)})
	}
	require.Len(t, b.items, 100_000)
	for i, e := range b.items {
		require.Equal(t, uint64(i), e.id)
	}
	b.release()
	assert.Nil(t, b.items)
	assert.Nil(t, b.mem)
}
