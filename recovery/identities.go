package recovery

import (
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"

	"github.com/idemctl/idemctl/idem"
)

// identityKey is a 64-bit hash of an identity, for routing and for the
// dry run's memory of this run. The zero byte cannot occur in either part
// (PostgreSQL text holds none), so the pair is unambiguous.
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
// It keeps 8 bytes of identity hash and 8 of payload hash per identity (and
// the line, for the note), so a million distinct identities take a few tens
// of MiB. Two distinct identities (or payloads) sharing 64 bits of hash is
// astronomically unlikely; it would only change a dry run's answer.
type runIdentities struct {
	seed maphash.Seed
	m    map[uint64]firstLine
}

type firstLine struct {
	hash uint64
	line uint32
}

func newRunIdentities(seed maphash.Seed) *runIdentities {
	return &runIdentities{seed: seed, m: map[uint64]firstLine{}}
}

// settle turns a would_apply into what a real run would answer after the
// earlier lines of this input, and remembers a first would_apply. Results
// come in input order.
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
	key := identityKey(s.seed, res.Tenant, res.OperationID)
	h := hashPrefix(res.IncomingHash)
	first, ok := s.m[key]
	if !ok {
		s.m[key] = firstLine{hash: h, line: uint32(res.Line)}
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
