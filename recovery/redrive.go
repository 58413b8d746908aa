package recovery

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/redrive"
)

//go:embed sql/read_back.sql
var readBackSQL string

//go:embed sql/provider_record.sql
var providerRecordSQL string

// RedriveTrace is what a re-drive sent and heard, for the report and the
// audit record.
type RedriveTrace struct {
	// Via is http or nats; Target the URL, or the NATS server and subject.
	Via    string `json:"via"`
	Target string `json:"target"`
	// Attempts is how many times the operation was sent, or tried to be
	// (never two at once).
	Attempts int `json:"attempts"`
	// NotSent is how many of the attempts could not connect to the target,
	// so sent nothing (redrive.ErrNotSent). Attempts == NotSent: the
	// service never received the operation.
	NotSent int `json:"not_sent,omitempty"`
	// Replies are the target's replies, or why none was read, in order.
	Replies []string `json:"replies"`
	// Verified is what the primary said afterwards: applied,
	// already_applied, purged, conflict, or absent.
	Verified string `json:"verified"`
}

// Errors of a re-drive, in Result.Err.
var (
	// ErrAckWithoutRecord: the service answered success and the primary
	// does not hold the identity: the service applies effects without
	// recording them atomically (the "effect before marker" mistake).
	ErrAckWithoutRecord = errors.New("the service answered success, but the identity is not recorded on the primary: it runs effects without recording them in the same transaction; not sent again, fix the service")
	// ErrRedriveRefused: the service refused the request (a 4xx other than
	// 409, 422, 429); not sent again.
	ErrRedriveRefused = errors.New("the service refused the re-drive; not sent again")
	// ErrRedriveUnknown: no reply within --retry-for and nothing recorded.
	ErrRedriveUnknown = errors.New("the service gave no usable answer within --retry-for and the identity is not recorded: the outcome is unknown; resolve it again (safe: the service receives the same identity)")
	// ErrRedriveNotSent: every attempt within --retry-for failed to
	// connect to the service (redrive.ErrNotSent), and nothing is recorded:
	// the operation was never sent, so nothing ran.
	ErrRedriveNotSent = errors.New("the service could not be reached within --retry-for (no connection on any attempt): nothing was sent, and the identity is not recorded; resolve it again once the service is up")
)

// Sent reports whether the service received the operation at least once
// (some attempt connected).
func (t *RedriveTrace) Sent() bool { return t != nil && t.Attempts > t.NotSent }

// gaveUp is the answer when the budget ends (or the run stops) with the
// identity still absent: unknown if the service may have received it, not
// sent if no attempt ever connected.
func gaveUp(res Result, trace *RedriveTrace) Result {
	res.Outcome, res.Err, res.Redrive = Failed, ErrRedriveUnknown, trace
	if !trace.Sent() {
		res.Err = ErrRedriveNotSent
	}
	trace.Verified = "absent"
	return res
}

// Waits on the primary after a send: after a success (the service committed
// before replying: its row is visible at once, but give a lagging reply its
// due), and after no usable reply (a commit may still land: check a few
// times before sending again; a late commit then meets the new request's
// claim, which settles it).
const (
	settleWait = 2 * time.Second
	unsureWait = 200 * time.Millisecond
)

// redriveOne is step 3 for a class whose effect lives in a service: the
// identity is absent (settle claimed it and rolled back), so the operation is
// sent to the service with its own identity, once at a time, and the answer
// is read on the primary, never taken from the reply:
//   - 2xx: the identity must now be there (applied, or already_applied when a
//     first attempt was still alive and won); still absent is an error, not
//     sent again;
//   - 422 (key reused with another payload): the primary says conflict;
//     when it holds nothing, the key was used at the provider with another
//     payload: the provider's answer is quarantined as the conflict's other
//     side (providerRefused);
//   - 409 (in flight), a timeout, a 5xx or a lost connection: the primary is
//     polled; the operation is sent again only while it is absent and the
//     budget (--retry-for) lasts;
//   - 429 or 503: sent again after Retry-After, within the budget;
//   - any other 4xx: an error, not sent again;
//   - NATS (no reply to read): the primary is polled; still absent when the
//     budget ends is pending.
func (r *Resolver) redriveOne(ctx context.Context, stop <-chan struct{}, j job, clk primaryClock) (Result, error) {
	res := j.result()
	if !j.idempotent {
		res.Outcome = Failed
		res.Err = cannotRun(j)
		return res, nil
	}
	if refused, err := r.refusedBefore(ctx, j); err != nil || refused.Outcome != "" {
		return refused, err
	}
	sender, err := r.sender(ctx, j)
	if err != nil {
		res.Outcome, res.Err = Failed, fmt.Errorf("re-drive: %w; nothing sent", err)
		return res, nil
	}
	trace := &RedriveTrace{Via: j.redrive.Kind, Target: j.redrive.Target()}
	deadline := time.Now().Add(r.retryFor())
	req := redrive.Request{Identity: j.p.Identity, Class: j.p.Class, Canonical: j.p.Canonical, Hash: j.p.Hash}
	// ours is when the first send that may have applied the operation went
	// out: an identity created before it is an earlier attempt's. A send the
	// service answered 409 (another attempt holds the key) or 429 applied
	// nothing, so it does not count: after only such sends, whatever the
	// primary holds is the first attempt's, however late it committed.
	ours := noSend
	for {
		if !r.ops.wait(stop) {
			if trace.Attempts == 0 {
				return res, errStopped
			}
			return gaveUp(res, trace), nil
		}
		sentAt := clk.now()
		reply, sendErr := sender.Send(ctx, req)
		trace.Attempts++
		notSent := errors.Is(sendErr, redrive.ErrNotSent)
		if notSent {
			trace.NotSent++
		}
		trace.Replies = append(trace.Replies, describeReply(reply, sendErr))
		if sendErr == nil && reply.Database != "" {
			if elsewhere, err := r.elsewhere(ctx, j, reply); err != nil || elsewhere != nil {
				if elsewhere != nil {
					res.Outcome, res.Err, res.Redrive = Failed, elsewhere, trace
					trace.Verified = "absent"
				}
				return res, err
			}
		}
		if ours == noSend && (sendErr != nil || (reply.Status != 409 && reply.Status != 429)) {
			ours = sentAt
		}
		out, resend, err := r.afterRedrive(ctx, stop, j, ours, reply, sendErr, deadline)
		if err != nil {
			return res, err
		}
		if !resend && out.Outcome == "" {
			return gaveUp(res, trace), nil // absent when the budget ended
		}
		if !resend {
			out.Redrive = trace
			trace.Verified = verified(out)
			if out.Outcome == AlreadyApplied && out.Note == "" {
				out.Note = firstAttemptWon(ours == noSend)
			}
			return out, nil
		}
		wait := backoffAfter(reply, trace.Attempts)
		if reply.RetryAfter > 0 && time.Now().Add(wait).After(deadline) {
			return throttled(res, trace, reply.RetryAfter, r.retryFor()), nil
		}
		if !sleepUntil(stop, wait, deadline) {
			return gaveUp(res, trace), nil
		}
	}
}

// throttled is the answer when the service asked to be sent the operation
// again later than --retry-for allows (Retry-After): nothing failed and the
// identity is absent, so it is pending, and the note says when to run again.
func throttled(res Result, trace *RedriveTrace, after, budget time.Duration) Result {
	res.Outcome, res.Redrive = Pending, trace
	trace.Verified = "absent"
	res.Note = fmt.Sprintf("the service asked to wait %s (Retry-After), beyond --retry-for %s; nothing failed and nothing is recorded: run it again after %s (or with --retry-for %s)",
		after.Round(time.Second), budget, time.Now().Add(after).UTC().Format("15:04:05 UTC"), (after + 10*time.Second).Round(time.Second))
	return res
}

// afterRedrive reads the primary after one send and says what the operation's
// answer is, or that it may be sent again (resend).
func (r *Resolver) afterRedrive(ctx context.Context, stop <-chan struct{}, j job, sentAt time.Time,
	reply redrive.Reply, sendErr error, deadline time.Time) (out Result, resend bool, err error) {
	status := reply.Status
	switch {
	case sendErr == nil && status >= 200 && status < 300, sendErr == nil && status == 422:
		out, found, err := r.poll(ctx, stop, j, sentAt, time.Now().Add(settleWait))
		if err != nil || found {
			return out, false, err
		}
		if status == 422 {
			return r.providerRefused(ctx, j, reply), false, nil
		}
		out = j.result()
		out.Outcome, out.Err = Failed, ErrAckWithoutRecord
		return out, false, nil
	case sendErr == nil && status >= 400 && status < 500 && status != 409 && status != 429:
		out = j.result()
		out.Outcome, out.Err = Failed, fmt.Errorf("%w (HTTP %d: %s)", ErrRedriveRefused, status, strings.TrimSpace(reply.Body))
		return out, false, nil
	case errors.Is(sendErr, redrive.ErrNotStored), errors.Is(sendErr, redrive.ErrRedirected):
		// No stream took the message: nothing can apply it, so there is
		// nothing to wait for on the primary. A redirect is not followed,
		// and not sent again.
		out = j.result()
		out.Outcome, out.Err = Failed, fmt.Errorf("re-drive: %w; not sent again", sendErr)
		return out, false, nil
	}
	// Unknown, in flight, throttled, or published to a stream: the primary
	// decides; send again only while the identity is absent.
	wait := deadline
	if j.redrive.Kind == redrive.KindHTTP && status != 409 {
		wait = minTime(deadline, time.Now().Add(unsureWait))
	}
	out, found, err := r.poll(ctx, stop, j, sentAt, wait)
	if err != nil || found {
		return out, false, err
	}
	if j.redrive.Kind == redrive.KindNATS || status == 409 {
		out = j.result()
		out.Outcome = Pending
		if status == 409 {
			out.Outcome, out.Err = Failed, fmt.Errorf("the service kept it in flight (409) past --retry-for and did not record it: %w", ErrRedriveUnknown)
		}
		return out, false, nil
	}
	return Result{}, time.Now().Before(deadline), nil
}

// poll reads the identity on the primary until it is there or until is
// passed: found false means still absent. Reading is enough when the
// identity holds this payload (no lock, no commit); when it holds another,
// the protocol runs (settle), which records the conflict.
func (r *Resolver) poll(ctx context.Context, stop <-chan struct{}, j job, sentAt, until time.Time) (Result, bool, error) {
	delay := 50 * time.Millisecond
	for {
		res, found, err := r.readBack(ctx, j, sentAt)
		if err != nil || found {
			return res, found, err
		}
		if !sleepUntil(stop, delay, until) {
			return Result{}, false, nil
		}
		delay = min(delay*2, time.Second)
	}
}

// lookRedriven is steps 1, 2 and 4 for a class re-driven through its
// service, without a transaction: the service's own claim settles any race,
// so nothing needs locking here. In one round trip: the primary check (and
// the primary's clock) and the identity as the primary holds it. Found with
// this payload is already_applied; with another, the protocol runs and
// records the conflict; absent (found false) is for step 3, the re-drive.
func (r *Resolver) lookRedriven(ctx context.Context, j job) (res Result, found bool, clk primaryClock, err error) {
	r.lookups.wait(ctx, 1)
	var b pgx.Batch
	var row storedRow
	b.Queue(beginOperationSQL, r.Operator).QueryRow(func(q pgx.Row) error {
		var at time.Time
		err := q.Scan(nil, &at)
		clk = clockFrom(at)
		return notPrimaryFrom(err)
	})
	b.Queue(readBackSQL, j.p.TenantID, j.p.OperationID).QueryRow(row.scan)
	// An entry plan not yet run that holds the identity: the protocol
	// refuses it in its transaction (settle), nothing sent.
	b.Queue(entryPendingCheckSQL, j.p.TenantID, j.p.OperationID)
	if err := r.Pool.SendBatch(ctx, &b).Close(); err != nil {
		return Result{}, false, clk, err
	}
	if row.stale {
		return Result{}, false, clk, errStaleSnapshot // the protocol decides
	}
	// Created before any send: what is there is an earlier attempt's.
	res, found, err = r.answerStored(ctx, j, row, noSend)
	return res, found, clk, err
}

// noSend stands for "no send of this re-drive may have applied it" where a
// send time is compared with the identity's creation: every identity was
// created before it.
var noSend = time.Time{}.AddDate(9000, 0, 0)

// firstAttemptWon is the note of an operation re-driven and found
// already_applied: an earlier attempt recorded it, not this re-drive.
// refused: the service answered every send 409 (in flight) or 429.
func firstAttemptWon(refused bool) string {
	if refused {
		return "the first attempt won: it was in flight when this re-drive was sent (the service answered 409, or 429) and it recorded the identity; the re-drive applied nothing (saved response returned)"
	}
	return "the first attempt won: the primary recorded the identity before this re-drive was sent; the re-drive applied nothing (saved response returned)"
}

// primaryClock reads the primary's clock without a round trip: one reading's
// offset from the local clock (off by at most the round trip it came in).
type primaryClock struct{ offset time.Duration }

// clockFrom is the clock of a reading just received.
func clockFrom(read time.Time) primaryClock { return primaryClock{offset: time.Until(read)} }

func (c primaryClock) now() time.Time { return time.Now().Add(c.offset) }

// readBack reads one identity on the primary: applied (created after sentAt,
// on the primary's clock) or already_applied (an earlier attempt, still
// alive, won) with the saved response, purged, or a conflict recorded by the
// protocol.
func (r *Resolver) readBack(ctx context.Context, j job, sentAt time.Time) (Result, bool, error) {
	var row storedRow
	if err := row.scan(r.Pool.QueryRow(ctx, readBackSQL, j.p.TenantID, j.p.OperationID)); err != nil {
		if connectionFailure(err) {
			return Result{}, false, nil // the next poll, or the caller's budget, decides
		}
		return Result{}, false, fmt.Errorf("read %s on the primary: %w", j.p.Identity, err)
	}
	if row.stale {
		return Result{}, false, nil // the next poll reads in a new snapshot
	}
	return r.answerStored(ctx, j, row, sentAt)
}

// storedRow is a row of read_back.sql: an identity as the primary holds it.
type storedRow struct {
	found, hasBody bool
	// stale: the body is missing in a snapshot that predates a purge swap.
	stale       bool
	hash, class string
	created     time.Time
	response    []byte
}

func (s *storedRow) scan(row pgx.Row) error {
	err := row.Scan(&s.hash, &s.class, &s.created, &s.hasBody, &s.response, &s.stale)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	s.found = err == nil
	return err
}

// answerStored answers from a stored row: absent (found false), purged,
// already_applied (created before sentAt) or applied, or, with another
// payload, a conflict recorded by the protocol (settle).
func (r *Resolver) answerStored(ctx context.Context, j job, s storedRow, sentAt time.Time) (Result, bool, error) {
	res := j.result()
	if !s.found {
		return res, false, nil
	}
	if s.hash != j.p.Hash || s.class != j.p.Class {
		out, err := r.settle(ctx, nil, j)
		return out, !errors.Is(err, errAppEffect), ignoreAbsent(err)
	}
	res.StoredHash, res.Response = s.hash, s.response
	switch {
	case !s.hasBody:
		res.Outcome, res.Response = Purged, nil
	case s.response == nil:
		res.Outcome, res.Err = Failed, ErrNoSavedResponse
	case s.created.Before(sentAt):
		res.Outcome = AlreadyApplied
	default:
		res.Outcome = Applied
	}
	return res, true, nil
}

func ignoreAbsent(err error) error {
	if errors.Is(err, errAppEffect) {
		return nil
	}
	return err
}

// sender returns the class's sender, made once per run, before its first
// send: its servers checked against the allow-list as it stands now, and its
// credential references read under the rules of the person running it. A
// refusal holds for the rest of the run.
func (r *Resolver) sender(ctx context.Context, j job) (redrive.Sender, error) {
	r.sendersMu.Lock()
	defer r.sendersMu.Unlock()
	if s, ok := r.byClass[j.p.Class]; ok {
		return s, nil
	}
	if err, ok := r.refused[j.p.Class]; ok {
		return nil, err
	}
	err := j.redrive.CheckTarget(ctx, r.Pool)
	var s redrive.Sender
	if err == nil {
		s, err = redrive.NewSender(*j.redrive, r.Credentials)
	}
	if err != nil {
		if !refusal(err) {
			return nil, err // a NATS server down, a lost database: the next operation tries again
		}
		if r.refused == nil {
			r.refused = map[string]error{}
		}
		r.refused[j.p.Class] = err
		return nil, err
	}
	if r.byClass == nil {
		r.byClass = map[string]redrive.Sender{}
	}
	r.byClass[j.p.Class] = s
	return s, nil
}

// refusal: a configuration refused, which no retry within a run changes.
func refusal(err error) bool {
	for _, e := range []error{redrive.ErrHostNotAllowed, redrive.ErrInvalidConfig, redrive.ErrSecret, redrive.ErrReference} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// closeSenders releases the run's senders.
func (r *Resolver) closeSenders() {
	r.sendersMu.Lock()
	defer r.sendersMu.Unlock()
	for _, s := range r.byClass {
		s.Close()
	}
	r.byClass, r.refused = nil, nil
}

// senders holds the senders of a run, by class, the classes refused, and
// the identity of the database the run reads (idem.database_id), read once.
type senders struct {
	sendersMu sync.Mutex
	byClass   map[string]redrive.Sender
	refused   map[string]error
	primaryDB string
}

// ErrOtherDatabase: the service that answered records into another database
// than the primary this run reads (a service of another environment behind
// the same address, or a run pointed at the wrong primary).
var ErrOtherDatabase = errors.New("the service records into another database than the one this run reads")

// elsewhere compares the database a service says it recorded into
// (idem.DatabaseHeader) with the primary this run reads: a mismatch is the
// error to report (nothing is sent again), nil when they agree.
func (r *Resolver) elsewhere(ctx context.Context, j job, reply redrive.Reply) (error, error) {
	r.sendersMu.Lock()
	primary := r.primaryDB
	r.sendersMu.Unlock()
	if primary == "" {
		id, err := idem.DatabaseID(ctx, r.Pool)
		if err != nil {
			return nil, err
		}
		r.sendersMu.Lock()
		r.primaryDB, primary = id, id
		r.sendersMu.Unlock()
	}
	if reply.Database == primary {
		return nil, nil
	}
	return fmt.Errorf("%w: the service at %s records into %s, this run reads %s; nothing is sent again (point the class's re-drive at this environment's service, or run resolve against the service's primary)",
		ErrOtherDatabase, j.redrive.Target(), reply.Database, primary), nil
}

func describeReply(reply redrive.Reply, err error) string {
	if err != nil {
		return "no reply: " + strings.Join(strings.Fields(err.Error()), " ")
	}
	return reply.String()
}

func verified(res Result) string {
	if res.Outcome == Failed {
		return "absent"
	}
	return string(res.Outcome)
}

// backoffAfter is the wait before sending again: the target's Retry-After,
// else a growing delay.
func backoffAfter(reply redrive.Reply, attempts int) time.Duration {
	if reply.RetryAfter > 0 {
		return reply.RetryAfter
	}
	return min(time.Duration(attempts*attempts)*200*time.Millisecond, 5*time.Second)
}

// sleepUntil waits d, unless that passes deadline or the run stops: false.
func sleepUntil(stop <-chan struct{}, d time.Duration, deadline time.Time) bool {
	if time.Now().Add(d).After(deadline) {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// maxAnswerBody is the longest provider answer body kept as evidence.
const maxAnswerBody = 64 << 10

// providerRefused is the answer to a 422 ("key used with another payload")
// while the primary holds no identity: the key was used at the provider, not
// here. The payload sent and the provider's answer are quarantined as a
// conflict whose other side is the provider's (idem.quarantine_provider_answer),
// decided by a person like any other; not sent again.
func (r *Resolver) providerRefused(ctx context.Context, j job, reply redrive.Reply) Result {
	out := j.result()
	body := reply.Body
	if len(body) > maxAnswerBody {
		body = body[:maxAnswerBody]
	}
	answer := quarantine.ProviderAnswer{Status: reply.Status, Body: strings.ReplaceAll(strings.ToValidUTF8(body, "\uFFFD"), "\x00", "\uFFFD"),
		Via: j.redrive.Kind, Target: j.redrive.Target()}
	qid, err := quarantine.RecordProviderAnswer(context.WithoutCancel(ctx), r.Pool, j.p.Identity, j.p.Class,
		j.p.Canonical, j.p.Hash, answer, r.Operator)
	if err != nil {
		out.Outcome = Failed
		out.Err = fmt.Errorf("the service refused a reused key (422) and the identity is not recorded; not sent again; its answer could not be quarantined (%v): %s",
			err, reply.Body)
		return out
	}
	out.Outcome, out.QuarantineID = Conflict, qid
	out.Note = fmt.Sprintf("quarantined as #%d: the provider answered %d (the key was used there with another payload) and nothing here holds it (idemctl quarantine show %d)",
		qid, reply.Status, qid)
	return out
}

// refusedBefore answers an operation the provider already refused as a
// reused key (a quarantine record of its answer to this payload): a
// conflict, not sent again, whatever the record's decision (the provider
// would refuse it again). An empty Outcome: no such record.
func (r *Resolver) refusedBefore(ctx context.Context, j job) (Result, error) {
	var qid int64
	var status string
	err := r.Pool.QueryRow(ctx, providerRecordSQL, j.p.TenantID, j.p.OperationID, j.p.Hash, j.p.Class).Scan(&qid, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return Result{}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("read the provider's earlier answer: %w", err)
	}
	res := j.result()
	res.Outcome, res.QuarantineID = Conflict, qid
	res.Note = fmt.Sprintf("quarantined as #%d (%s): the provider refused this key with another payload before and nothing here holds it; not sent again (idemctl quarantine show %d)",
		qid, status, qid)
	return res, nil
}
