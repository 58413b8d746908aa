package recovery

import (
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"

	"github.com/idemctl/idemctl/idem"
)

// identityKey is a 64-bit hash of an identity, for routing and for the
// input scan's entries (which tell apart identities sharing one exactly).
// The zero byte cannot occur in either part (PostgreSQL text holds none), so
// the pair is unambiguous.
func identityKey(seed maphash.Seed, tenant, operationID string) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(tenant)
	h.WriteByte(0)
	h.WriteString(operationID)
	return h.Sum64()
}

// hashPrefix is the first 8 bytes of a canonical payload hash
// (jcs-sha256:<hex>); 0 if it is not one.
func hashPrefix(h string) uint64 {
	hex, ok := strings.CutPrefix(h, idem.HashPrefix)
	if !ok || len(hex) < 16 {
		return 0
	}
	v, _ := strconv.ParseUint(hex[:16], 16, 64)
	return v
}

// runIdentities is a dry run's memory of the identities it has answered
// would_apply, so that a later line of the same identity gets the answer a
// real run gives it: the real run applies the first line, then answers a
// later one already_applied (same payload) or quarantines it (another
// payload). The lookups only see the database as it was before the run.
//
// For an identity of the input scan (inputPayloads), the line of its first
// would_apply is kept in the scan's entry when that line holds the entry's
// payload (the usual case: nothing more is allocated); any other is kept in
// a map by identity. Payloads are compared by 64 bits of their hash (a Note,
// not a stored hash, says which line differs).
type runIdentities struct {
	in *inputPayloads
	m  map[string]firstLine
}

type firstLine struct {
	hash uint64
	line uint32
}

func newRunIdentities(in *inputPayloads) *runIdentities {
	return &runIdentities{in: in, m: map[string]firstLine{}}
}

// settle turns a would_apply into what a real run would answer after the
// earlier lines of this input, and remembers a first would_apply. Results
// come in input order, from one goroutine at a time.
//
// A line with the same identity and payload as an earlier would_apply line is
// answered already_applied (what the real run answers it, so that the counts
// of a dry run and of the real run match) with a Note naming the earlier line;
// one with another payload is answered would_conflict, with a Note instead of
// a stored hash (only 8 bytes of it are kept).
func (s *runIdentities) settle(res *Result) {
	if res.Outcome != WouldApply && res.Outcome != WouldRedrive {
		return
	}
	h := hashPrefix(res.IncomingHash)
	entry := -1
	if s.in != nil {
		entry = s.in.find(s.in.idHash(s.in.seed, res.Tenant, res.OperationID))
	}
	first, ok := s.first(entry, res)
	if !ok {
		s.remember(entry, res, firstLine{hash: h, line: uint32(res.Line)})
		return
	}
	if first.hash == h {
		res.Outcome, res.StoredHash, res.Conditional = AlreadyApplied, res.IncomingHash, true
		res.Note = fmt.Sprintf("same identity and payload as line %d of this input, which a real run applies first (if its effect refuses, this line's refuses too: error)", first.line)
		return
	}
	res.Outcome = WouldConflict
	res.Note = fmt.Sprintf("line %d of this input has this identity with another payload: a real run applies that line and quarantines this one", first.line)
}

// first is the first would_apply of res's identity, if any; entry is the
// identity's first scan entry, -1 for none.
func (s *runIdentities) first(entry int, res *Result) (firstLine, bool) {
	if entry >= 0 {
		if e := &s.in.entries.items[entry]; e.state != 0 {
			return firstLine{hash: e.payload, line: uint32(e.state)}, true
		}
	}
	if len(s.m) == 0 {
		return firstLine{}, false
	}
	f, ok := s.m[collisionKey(res.Tenant, res.OperationID)]
	return f, ok
}

func (s *runIdentities) remember(entry int, res *Result, f firstLine) {
	if entry >= 0 {
		if e := &s.in.entries.items[entry]; e.payload == f.hash {
			e.state = uint64(f.line)
			return
		}
	}
	s.m[collisionKey(res.Tenant, res.OperationID)] = f
}
