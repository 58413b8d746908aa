package recovery

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"runtime"
	"sync"

	"github.com/idemctl/idemctl/redrive"
)

// An input that holds one identity with two payloads (or classes) does not
// say which is the true one, so a run must never apply one of them on its
// own: every line of such an identity is answered conflict ("the input holds
// this identity with another payload at line N") and nothing is sent for
// it, unless the primary already holds the identity: then each line is
// answered against the primary as usual (already_applied for the payload it
// holds, conflict and quarantined for the others). A dry run answers the
// same. Run reads the input once before it starts to find these identities
// (inputPayloads); only lines that are valid and of a known class count.

// payloadLine is one payload of an identity (a hash of its canonical hash and
// class) and the first input line holding it.
type payloadLine struct {
	payload uint64
	line    uint32
}

// inputPayloads is what the input holds per identity: its first payload and
// line, and every payload of the identities it holds with two or more.
// About 24 bytes an identity.
type inputPayloads struct {
	seed  maphash.Seed
	first map[uint64]payloadLine
	multi map[uint64][]payloadLine
}

func newInputPayloads(seed maphash.Seed) *inputPayloads {
	return &inputPayloads{seed: seed, first: map[uint64]payloadLine{}, multi: map[uint64][]payloadLine{}}
}

func (in *inputPayloads) payloadKey(hash, class string) uint64 {
	return identityKey(in.seed, hash, class)
}

// add records a line; lines may come in any order.
func (in *inputPayloads) add(id, payload uint64, line int) {
	pl := payloadLine{payload: payload, line: uint32(line)}
	if m, ok := in.multi[id]; ok {
		for i := range m {
			if m[i].payload == payload {
				m[i].line = min(m[i].line, pl.line)
				return
			}
		}
		in.multi[id] = append(m, pl)
		return
	}
	f, ok := in.first[id]
	switch {
	case !ok:
		in.first[id] = pl
	case f.payload == payload:
		f.line = min(f.line, pl.line)
		in.first[id] = f
	default:
		in.multi[id] = []payloadLine{f, pl}
		delete(in.first, id)
	}
}

// other is the first line of the input holding this identity with another
// payload or class than this one; 0 when there is none.
func (in *inputPayloads) other(tenant, operationID, hash, class string) int {
	if in == nil || len(in.multi) == 0 {
		return 0
	}
	m, ok := in.multi[identityKey(in.seed, tenant, operationID)]
	if !ok {
		return 0
	}
	payload := in.payloadKey(hash, class)
	line := uint32(0)
	for _, pl := range m {
		if pl.payload != payload && (line == 0 || pl.line < line) {
			line = pl.line
		}
	}
	return int(line)
}

// inputConflictNote is what a line of such an identity says.
func inputConflictNote(line int) string {
	return fmt.Sprintf("the input holds this identity with another payload at line %d: which one is true is not known, so nothing is sent for it; correct the input (keep the true line) and run it again", line)
}

// scanInput reads src to its end, preparing every line (in parallel, as a
// run does), and returns the payloads it holds per identity; then rewinds
// src. A source that cannot be read twice is refused (ErrNotRewindable):
// without knowing the whole input, a run could apply one of two payloads.
func (r *Resolver) scanInput(ctx context.Context, src Source, classes map[string]classInfo, seed maphash.Seed) (*inputPayloads, error) {
	rw, ok := src.(rewinder)
	if !ok {
		return nil, ErrNotRewindable
	}
	if _, single := src.(*single); single {
		return nil, nil
	}
	in := newInputPayloads(seed)
	type seen struct {
		id, payload uint64
		line        int
	}
	chunks := make(chan []rawLine, runtime.GOMAXPROCS(0))
	found := make(chan []seen, runtime.GOMAXPROCS(0))
	var workers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		workers.Add(1)
		go func() {
			defer workers.Done()
			var parser lineParser
			for lines := range chunks {
				out := make([]seen, 0, len(lines))
				for _, rl := range lines {
					it := rl.parsed(&parser)
					if it.Invalid != nil {
						continue
					}
					p, err := prepare(it.Request, r.Limits)
					if _, known := classes[p.Class]; err != nil || !known {
						continue
					}
					out = append(out, seen{identityKey(seed, p.TenantID, p.OperationID), in.payloadKey(p.Hash, p.Class), it.Line})
				}
				found <- out
			}
		}()
	}
	go func() {
		workers.Wait()
		close(found)
	}()
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for out := range found {
			for _, s := range out {
				in.add(s.id, s.payload, s.line)
			}
		}
	}()
	readErr := readChunks(ctx, src, chunks)
	<-collected
	switch {
	case readErr != nil:
		return nil, readErr
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	if err := rw.Rewind(); err != nil {
		return nil, err
	}
	return in, nil
}

// readChunks reads src to its end (or until ctx is done) and sends its valid
// lines in chunks, then closes chunks. Only reading is serial: an NDJSON line
// is parsed by the worker that prepares it (each chunk holds its lines' text
// in one buffer).
func readChunks(ctx context.Context, src Source, chunks chan<- []rawLine) error {
	var readErr error
	nd, raw := src.(*ndjson)
	chunk := make([]rawLine, 0, 256)
	var text []byte
	for ctx.Err() == nil {
		var rl rawLine
		var err error
		if raw {
			rl, text, err = nd.nextRaw(text)
		} else {
			rl.item, err = src.Next()
		}
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			break
		}
		if rl.item.Invalid == nil {
			chunk = append(chunk, rl)
		}
		if len(chunk) == cap(chunk) {
			chunks <- chunk
			chunk, text = make([]rawLine, 0, 256), nil
		}
	}
	if len(chunk) > 0 {
		chunks <- chunk
	}
	close(chunks)
	return readErr
}

// answerAmbiguous answers a line of an identity the input holds with two
// payloads: against the primary when it holds the identity (lookRedriven:
// already_applied, purged, or conflict recorded by the protocol), else
// conflict for the input alone, with nothing sent or written.
func (r *Resolver) answerAmbiguous(ctx context.Context, stop <-chan struct{}, j job) (Result, error) {
	wait := r.backoff()
	for tries := 1; ; tries++ {
		res, found, _, err := r.lookRedriven(ctx, j)
		if err == nil {
			r.reachable()
		}
		switch {
		case err == nil && found:
			return res, nil
		case err == nil:
			res = j.result()
			res.Outcome, res.Note = Conflict, inputConflictNote(j.inputOther)
			return res, nil
		case isNotPrimary(err):
			return Result{}, err
		case errors.Is(err, errStaleSnapshot) && tries < 3:
		case connectionFailure(err):
			if werr := wait.again(err, stop); werr != nil {
				return Result{}, werr
			}
		default:
			return failed(j, err), nil
		}
	}
}

// cannotRun is why step 3 cannot run for an absent identity of j's class,
// nil when it can: an application-code class without a re-drive, or one
// re-driven through a service not declared downstream-idempotent. The real
// run answers error with it, and the dry run predicts the same.
func cannotRun(j job) error {
	switch {
	case !j.sqlEffect && j.redrive == nil:
		return errAppEffect
	case j.redrive != nil && !j.idempotent:
		return fmt.Errorf("%w: class %s is not re-driven, since a crash between its service's downstream call and its commit would charge twice on a re-drive (declare it with --downstream-idempotent once its calls carry a key derived from the identity)",
			redrive.ErrNotIdempotent, j.p.Class)
	}
	return nil
}
