package recovery

import (
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math/bits"
	"slices"
	"sort"
)

// inputPayloads is what the input holds per identity (scanInput): every
// payload (and class) of it, with the first line holding each. It is a
// sorted array of fixed-size entries, one per identity and payload, held off
// the Go heap (bulk), looked up through an index of its hashes: 32 bytes an
// entry, where maps took about 56 bytes an identity on the heap, twice that
// in resident memory.
//
// Identities are sorted by a 64-bit hash of them (seeded per run). Two
// identities sharing a hash are told apart exactly: the scan reads again
// every line of a hash held by more than one line and compares identities;
// identities that truly share their hash are kept apart in a map keyed by
// the identity itself (collided), so that no answer depends on the hash
// alone. Payloads are compared by class and 64 bits of their SHA-256.
type inputPayloads struct {
	seed   maphash.Seed
	idHash func(seed maphash.Seed, tenant, operationID string) uint64
	// classes numbers the classes of the run, for the entries.
	classes map[string]uint32

	entries bulk[scanEntry]
	// index[b] is the first entry whose hash has b as its top bits (shift).
	index bulk[uint32]
	shift uint
	// multi: some identity is held with two payloads or more.
	multi bool
	// collided holds, by identity (collisionKey), the payloads of the
	// identities whose hash another identity of the input shares; their
	// hashes are in collidedHashes and they have no entries.
	collided       map[string][]payloadLine
	collidedHashes map[uint64]bool
}

// scanEntry is one payload of one identity: the identity's hash, the
// payload's (hashPrefix of its canonical hash) and class, and the first
// line holding them. While the input is scanned, state is the line's offset
// in the input; afterwards, on the first entry of an identity, it is the
// line of the run's first would_apply of it (runIdentities), 0 until then.
type scanEntry struct {
	id      uint64
	payload uint64
	state   uint64
	line    uint32
	class   uint32
}

// payloadLine is one payload of an identity that collided, and the first
// line holding it.
type payloadLine struct {
	payload uint64
	class   uint32
	line    uint32
}

func newInputPayloads(seed maphash.Seed, classes map[string]classInfo) *inputPayloads {
	in := &inputPayloads{seed: seed, idHash: identityKey, classes: make(map[string]uint32, len(classes))}
	names := make([]string, 0, len(classes))
	for name := range classes {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, name := range names {
		in.classes[name] = uint32(i + 1)
	}
	return in
}

// entry is what the scan keeps of a valid line of a known class.
func (in *inputPayloads) entry(tenant, operationID, hash, class string, line int, off int64) scanEntry {
	return scanEntry{id: in.idHash(in.seed, tenant, operationID), payload: hashPrefix(hash), class: in.classes[class],
		line: uint32(line), state: uint64(off)}
}

// collisionKey is an identity exactly, as a map key.
func collisionKey(tenant, operationID string) string { return tenant + "\x00" + operationID }

// errInputChanged: a line read again is not what it was.
var errInputChanged = errors.New("the input changed while it was read")

// identityReader gives the identity of a line the scan kept, read again
// from the input.
type identityReader func(e *scanEntry) (tenant, operationID string, err error)

// seal sorts the entries, tells apart identities that share a hash (read
// reads their lines again), keeps one entry per identity and payload (its
// first line) and builds the index. It is called once, after the last add.
func (in *inputPayloads) seal(read identityReader) error {
	es := in.entries.items
	slices.SortFunc(es, func(a, b scanEntry) int {
		if c := cmp.Compare(a.id, b.id); c != 0 {
			return c
		}
		if c := cmp.Compare(a.payload, b.payload); c != 0 {
			return c
		}
		if c := cmp.Compare(a.class, b.class); c != 0 {
			return c
		}
		return cmp.Compare(a.line, b.line)
	})
	var collided [][]scanEntry
	for i := 0; i < len(es); {
		j := i + 1
		for j < len(es) && es[j].id == es[i].id {
			j++
		}
		if j-i > 1 {
			same, err := in.sameIdentity(es[i:j], read)
			if err != nil {
				return err
			}
			if !same {
				collided = append(collided, es[i:j])
			}
		}
		i = j
	}
	for _, group := range collided {
		if err := in.collide(group, read); err != nil {
			return err
		}
	}
	out := 0
	for k := range es {
		e := es[k]
		if k > 0 && e.id == es[k-1].id && e.payload == es[k-1].payload && e.class == es[k-1].class {
			continue // a later line of one identity and payload
		}
		if in.collidedHashes[e.id] {
			continue
		}
		if out > 0 && es[out-1].id == e.id {
			in.multi = true
		}
		e.state = 0
		es[out] = e
		out++
	}
	in.entries.items = es[:out]
	in.buildIndex()
	return nil
}

// sameIdentity says whether the lines of group (one hash) all hold one
// identity.
func (in *inputPayloads) sameIdentity(group []scanEntry, read identityReader) (bool, error) {
	var first string
	for k := range group {
		tenant, op, err := read(&group[k])
		if err != nil {
			return false, err
		}
		if in.idHash(in.seed, tenant, op) != group[k].id {
			return false, fmt.Errorf("%w (line %d)", errInputChanged, group[k].line)
		}
		key := collisionKey(tenant, op)
		if k == 0 {
			first = key
		} else if key != first {
			return false, nil
		}
	}
	return true, nil
}

// collide keeps the identities of group (one hash, two identities or more)
// in the map of collided identities.
func (in *inputPayloads) collide(group []scanEntry, read identityReader) error {
	if in.collided == nil {
		in.collided, in.collidedHashes = map[string][]payloadLine{}, map[uint64]bool{}
	}
	in.collidedHashes[group[0].id] = true
	for k := range group {
		tenant, op, err := read(&group[k])
		if err != nil {
			return err
		}
		key := collisionKey(tenant, op)
		pls := in.collided[key]
		pl := payloadLine{payload: group[k].payload, class: group[k].class, line: group[k].line}
		i := slices.IndexFunc(pls, func(p payloadLine) bool { return p.payload == pl.payload && p.class == pl.class })
		switch {
		case i < 0:
			pls = append(pls, pl)
		default:
			pls[i].line = min(pls[i].line, pl.line)
		}
		in.collided[key] = pls
		in.multi = in.multi || len(pls) > 1
	}
	return nil
}

// buildIndex indexes the sorted entries by the top bits of their hashes,
// about two entries a bucket.
func (in *inputPayloads) buildIndex() {
	es := in.entries.items
	bucketBits := max(1, bits.Len(uint(len(es)))-1)
	in.shift = uint(64 - bucketBits)
	in.index.reserve(1<<bucketBits + 1)
	e := 0
	for b := 0; b <= 1<<bucketBits; b++ {
		for e < len(es) && es[e].id>>in.shift < uint64(b) {
			e++
		}
		in.index.push(uint32(e))
	}
}

// find is the first entry of an identity, -1 when the input does not hold it
// or it is one that collided (see collided).
func (in *inputPayloads) find(id uint64) int {
	if len(in.entries.items) == 0 || in.collidedHashes[id] {
		return -1
	}
	b := id >> in.shift
	es := in.entries.items
	for i, end := int(in.index.items[b]), int(in.index.items[b+1]); i < end; i++ {
		switch {
		case es[i].id == id:
			return i
		case es[i].id > id:
			return -1
		}
	}
	return -1
}

// other is the first line of the input holding this identity with another
// payload or class than this one; 0 when there is none.
func (in *inputPayloads) other(tenant, operationID, hash, class string) int {
	if in == nil || !in.multi {
		return 0
	}
	id := in.idHash(in.seed, tenant, operationID)
	payload, classNo := hashPrefix(hash), in.classes[class]
	line := uint32(0)
	if in.collidedHashes[id] {
		for _, pl := range in.collided[collisionKey(tenant, operationID)] {
			if (pl.payload != payload || pl.class != classNo) && (line == 0 || pl.line < line) {
				line = pl.line
			}
		}
		return int(line)
	}
	i := in.find(id)
	if i < 0 {
		return 0
	}
	es := in.entries.items
	for ; i < len(es) && es[i].id == id; i++ {
		if (es[i].payload != payload || es[i].class != classNo) && (line == 0 || es[i].line < line) {
			line = es[i].line
		}
	}
	return int(line)
}

// release returns the entries' memory; the input is forgotten.
func (in *inputPayloads) release() {
	if in == nil {
		return
	}
	in.entries.release()
	in.index.release()
	in.multi, in.collided, in.collidedHashes = false, nil, nil
}

// readerOf is how the scan reads a line's identity again: at its offset
// when src is an NDJSON input that can be read at an offset; else, once
// needed, by reading src again from its start and keeping the identities of
// the lines asked for (lines of a hash that another line shares: few).
func readerOf(src Source, rw rewinder, in *inputPayloads) identityReader {
	var p lineParser
	var buf []byte
	if nd, ok := src.(*ndjson); ok {
		if ra, ok := nd.src.(io.ReaderAt); ok {
			return func(e *scanEntry) (string, string, error) {
				var text []byte
				var err error
				if text, buf, err = nd.lineAt(ra, int64(e.state), buf); err != nil {
					return "", "", err
				}
				req, invalid := p.parse(text)
				if invalid != nil {
					return "", "", fmt.Errorf("%w (line %d)", errInputChanged, e.line)
				}
				return req.Tenant, req.OperationID, nil
			}
		}
	}
	var byLine map[uint32][2]string
	return func(e *scanEntry) (string, string, error) {
		if byLine == nil {
			var err error
			if byLine, err = identitiesOfLines(src, rw, in.entries.items); err != nil {
				return "", "", err
			}
		}
		id, ok := byLine[e.line]
		if !ok {
			return "", "", fmt.Errorf("%w (line %d)", errInputChanged, e.line)
		}
		return id[0], id[1], nil
	}
}

// identitiesOfLines reads src again from its start and returns the identity
// of every line of entries whose hash another entry shares.
func identitiesOfLines(src Source, rw rewinder, entries []scanEntry) (map[uint32][2]string, error) {
	var want []uint32
	for i := range entries {
		if (i > 0 && entries[i-1].id == entries[i].id) || (i+1 < len(entries) && entries[i+1].id == entries[i].id) {
			want = append(want, entries[i].line)
		}
	}
	slices.Sort(want)
	if err := rw.Rewind(); err != nil {
		return nil, err
	}
	out := make(map[uint32][2]string, len(want))
	for len(out) < len(want) {
		it, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if k := sort.Search(len(want), func(i int) bool { return want[i] >= uint32(it.Line) }); k < len(want) && want[k] == uint32(it.Line) {
			out[uint32(it.Line)] = [2]string{it.Request.Tenant, it.Request.OperationID}
		}
	}
	return out, nil
}
