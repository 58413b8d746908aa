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

// inputConflictNote is what a line of such an identity says.
func inputConflictNote(line int) string {
	return fmt.Sprintf("the input holds this identity with another payload at line %d: which one is true is not known, so nothing is sent for it; correct the input (keep the true line) and run it again", line)
}

// scanInput reads src to its end, preparing every line (in parallel, as a
// run does), and returns the payloads it holds per identity; then rewinds
// src. A source that cannot be read twice is refused (ErrNotRewindable):
// without knowing the whole input, a run could apply one of two payloads.
// The caller releases what it returns (inputPayloads.release).
func (r *Resolver) scanInput(ctx context.Context, src Source, classes map[string]classInfo, seed maphash.Seed) (*inputPayloads, error) {
	rw, ok := src.(rewinder)
	if !ok {
		return nil, ErrNotRewindable
	}
	if _, single := src.(*single); single {
		return nil, nil
	}
	in := newInputPayloads(seed, classes)
	if r.idHash != nil {
		in.idHash = r.idHash
	}
	chunks := make(chan []rawLine, runtime.GOMAXPROCS(0))
	found := make(chan []scanEntry, runtime.GOMAXPROCS(0))
	var workers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		workers.Add(1)
		go func() {
			defer workers.Done()
			var parser lineParser
			for lines := range chunks {
				out := make([]scanEntry, 0, len(lines))
				for _, rl := range lines {
					it := rl.parsed(&parser)
					if it.Invalid != nil {
						continue
					}
					p, err := prepare(it.Request, r.Limits)
					if _, known := classes[p.Class]; err != nil || !known {
						continue
					}
					out = append(out, in.entry(p.TenantID, p.OperationID, p.Hash, p.Class, it.Line, rl.off))
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
			for _, e := range out {
				in.entries.push(e)
			}
		}
	}()
	readErr := readChunks(ctx, src, chunks)
	<-collected
	err := readErr
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = in.seal(readerOf(src, rw, in))
	}
	if err == nil {
		err = rw.Rewind()
	}
	if err != nil {
		in.release()
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
