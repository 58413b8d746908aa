package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Kill points: the steps at which a worker can be killed. Each design passes
// through its own subset, in order.
const (
	StepBeforeCall      = "before_call"      // connected, nothing sent
	StepAfterBegin      = "after_begin"      // transaction open, nothing written
	StepAfterCheck      = "after_check"      // the SELECT that looks for the identity returned
	StepAfterMarker     = "after_marker"     // the marker / inbox row is written, not committed
	StepMarkerCommitted = "marker_committed" // the marker is committed, the effect not started
	StepDuringEffect    = "during_effect"    // inside the effect, the server waiting on an account lock
	StepAfterEffect     = "after_effect"     // the effect returned, not committed
	StepEffectCommitted = "effect_committed" // the effect is committed, the marker not written
	StepBeforeCommit    = "before_commit"    // everything written, COMMIT not sent
	StepCommitSent      = "commit_sent"      // COMMIT processed by the server, its reply never read
	StepBeforeReport    = "before_report"    // committed and acknowledged, the caller never told
)

// Anomaly columns.
const (
	AnomalyLost            = "lost"
	AnomalyDoubled         = "doubled"
	AnomalyWrongResponse   = "wrong_response"
	AnomalyMissedConflicts = "missed_conflicts"
	AnomalyFalseConflicts  = "false_conflicts"
	AnomalyLostRevisions   = "lost_revisions"
)

// AnomalyColumns lists the anomaly columns in the order the table shows them.
var AnomalyColumns = []string{AnomalyLost, AnomalyDoubled, AnomalyWrongResponse, AnomalyMissedConflicts,
	AnomalyFalseConflicts, AnomalyLostRevisions}

// Reply outcomes a design answers with.
const (
	OutcomeApplied        = "applied"
	OutcomeAlreadyApplied = "already_applied"
	OutcomeConflict       = "conflict"
)

// Reply is what a caller receives for one delivery.
type Reply struct {
	Outcome  string          `json:"outcome"`
	Response json.RawMessage `json:"response,omitempty"`
}

// stepHook is told of each step a delivery reaches: the worker prints it and
// may be killed there; an in-process racer may wait at a barrier.
type stepHook func(ctx context.Context, s *session, step string) error

// session runs one delivery of one design on one connection.
type session struct {
	conn   *pgx.Conn
	q      statements
	at     stepHook
	killAt string // the worker's kill step; "" in process
	// effectStmt is the statement of the design's effect ("effect": the ledger).
	effectStmt string
	// redis is the lab's own Redis server, for the designs that mark there.
	redis *redisClient
}

func (s *session) step(ctx context.Context, name string) error {
	if s.at == nil {
		return nil
	}
	return s.at(ctx, s, name)
}

func (s *session) stmt(name string) string {
	sql, ok := s.q[name]
	if !ok {
		panic("lab: no statement " + name) // a programming error: the files are embedded
	}
	return sql
}

func (s *session) exec(ctx context.Context, name string, args ...any) (pgconn.CommandTag, error) {
	tag, err := s.conn.Exec(ctx, s.stmt(name), args...)
	if err != nil {
		return tag, fmt.Errorf("%s: %w", name, err)
	}
	return tag, nil
}

func (s *session) queryRow(ctx context.Context, name string, args []any, dest ...any) error {
	if err := s.conn.QueryRow(ctx, s.stmt(name), args...).Scan(dest...); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (s *session) begin(ctx context.Context) error {
	_, err := s.conn.Exec(ctx, "BEGIN")
	return err
}

// beginAt opens the delivery's transaction between the kill points
// before_call and after_begin.
func (s *session) beginAt(ctx context.Context) error {
	if err := s.step(ctx, StepBeforeCall); err != nil {
		return err
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	return s.step(ctx, StepAfterBegin)
}

// commit commits an intermediate transaction (the marker of marker_separate_tx,
// the effect of effect_before_marker).
func (s *session) commit(ctx context.Context) error {
	tag, err := s.conn.Exec(ctx, "COMMIT")
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if tag.String() != "COMMIT" {
		return fmt.Errorf("commit: the transaction was rolled back (%s)", tag)
	}
	return nil
}

// commitFinal commits the delivery's last transaction. A worker to be killed at
// commit_sent writes COMMIT on the wire and stops without reading the reply.
func (s *session) commitFinal(ctx context.Context) error {
	if err := s.commitOrDie(ctx); err != nil {
		return err
	}
	return s.step(ctx, StepBeforeReport)
}

// commitOrDie commits, unless the worker is to be killed at commit_sent: then
// it writes COMMIT on the wire and waits for the kill without reading the reply.
func (s *session) commitOrDie(ctx context.Context) error {
	if s.killAt == StepCommitSent {
		fe := s.conn.PgConn().Frontend()
		fe.SendQuery(&pgproto3.Query{String: "COMMIT"})
		if err := fe.Flush(); err != nil {
			return fmt.Errorf("send commit: %w", err)
		}
		return s.step(ctx, StepCommitSent) // does not return before the kill
	}
	return s.commit(ctx)
}

// rollback ends whatever transaction a failed delivery left open.
func (s *session) rollback() {
	if s.conn.PgConn().TxStatus() == 'I' || s.conn.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = s.conn.Exec(ctx, "ROLLBACK")
}

// effect runs the design's effect, the ledger's transfer unless the design
// says otherwise (one posting), between the kill points during_effect and
// after_effect.
func (s *session) effect(ctx context.Context, d delivery) (json.RawMessage, error) {
	if err := s.step(ctx, StepDuringEffect); err != nil {
		return nil, err
	}
	name := s.effectStmt
	if name == "" {
		name = "effect"
	}
	var resp json.RawMessage
	if err := s.queryRow(ctx, name, []any{d.Tenant, d.OperationID, d.Payload}, &resp); err != nil {
		return nil, err
	}
	if err := s.step(ctx, StepAfterEffect); err != nil {
		return nil, err
	}
	return resp, nil
}

// answerFromRow answers a delivery whose identity is taken from the row that
// statement read finds (its hash and saved response), and commits.
func (s *session) answerFromRow(ctx context.Context, read string, id []any, hash string) (Reply, error) {
	var stored string
	var resp json.RawMessage
	if err := s.queryRow(ctx, read, id, &stored, &resp); err != nil {
		return Reply{}, err
	}
	if err := s.commit(ctx); err != nil {
		return Reply{}, err
	}
	return answerStored(hash, stored, resp), nil
}

// answerStored answers a delivery whose payload hashes to hash from a stored
// row, comparing hashes: the correct rule, which most broken designs follow.
func answerStored(hash, storedHash string, storedResponse json.RawMessage) Reply {
	if storedHash != hash {
		return Reply{Outcome: OutcomeConflict}
	}
	return Reply{Outcome: OutcomeAlreadyApplied, Response: storedResponse}
}

// DesignNames lists the designs in the order the lab runs them.
func DesignNames() []string {
	out := make([]string, len(designs))
	for i, d := range designs {
		out[i] = d.Name
	}
	return out
}

// ErrUnknownDesign is returned for a design name the lab does not have.
var ErrUnknownDesign = errors.New("unknown design")

func designByName(name string) (design, error) {
	for _, d := range designs {
		if d.Name == name {
			return d, nil
		}
	}
	return design{}, fmt.Errorf("%w %q (have %v)", ErrUnknownDesign, name, DesignNames())
}

// killStep is where the first attempt of t dies under d.
func (d design) killStep(t Trial) string {
	steps := d.steps(t)
	i := int(t.KillR * float64(len(steps)))
	if i >= len(steps) {
		i = len(steps) - 1
	}
	return steps[i]
}

// run wraps a design's delivery so that a failure never leaves a transaction open.
func (d design) run(ctx context.Context, s *session, del delivery) (Reply, error) {
	r, err := d.deliver(ctx, s, del)
	if err != nil {
		s.rollback()
		return Reply{}, err
	}
	return r, nil
}

// deliverAtomic calls the Core executor installed in the scratch schema: either
// execute (one call) or claim, effect, complete (idem.ExecuteFunc's protocol).
func deliverAtomic(ctx context.Context, s *session, d delivery) (Reply, error) {
	args := []any{d.Tenant, d.OperationID, d.Payload, d.Hash}
	if err := s.step(ctx, StepBeforeCall); err != nil {
		return Reply{}, err
	}
	if err := s.begin(ctx); err != nil {
		return Reply{}, err
	}
	if err := s.step(ctx, StepAfterBegin); err != nil {
		return Reply{}, err
	}
	var r Reply
	if !d.ClaimPath {
		// The lock wait that holds a worker "during the effect" happens inside
		// execute, after its inbox insert.
		if err := s.step(ctx, StepDuringEffect); err != nil {
			return Reply{}, err
		}
		if err := s.queryRow(ctx, "execute", args, &r.Outcome, &r.Response); err != nil {
			return Reply{}, err
		}
	} else {
		if err := s.queryRow(ctx, "claim", args, &r.Outcome, &r.Response); err != nil {
			return Reply{}, err
		}
		if err := s.step(ctx, StepAfterMarker); err != nil {
			return Reply{}, err
		}
		if r.Outcome == "claimed" {
			resp, err := s.effect(ctx, d)
			if err != nil {
				return Reply{}, err
			}
			if _, err := s.exec(ctx, "complete", d.Tenant, d.OperationID, string(resp)); err != nil {
				return Reply{}, err
			}
			r = Reply{Outcome: OutcomeApplied, Response: resp}
		}
	}
	if err := s.step(ctx, StepBeforeCommit); err != nil {
		return Reply{}, err
	}
	// A conflict is committed too: its quarantine record is part of the answer.
	if err := s.commitFinal(ctx); err != nil {
		return Reply{}, err
	}
	return r, nil
}

func deliverMarkerSeparate(ctx context.Context, s *session, d delivery) (Reply, error) {
	id := []any{d.Tenant, d.OperationID}
	if err := s.step(ctx, StepBeforeCall); err != nil {
		return Reply{}, err
	}
	if err := s.begin(ctx); err != nil {
		return Reply{}, err
	}
	tag, err := s.exec(ctx, "insert_marker", d.Tenant, d.OperationID, d.Hash)
	if err != nil {
		return Reply{}, err
	}
	if err := s.step(ctx, StepAfterMarker); err != nil {
		return Reply{}, err
	}
	if tag.RowsAffected() == 0 {
		return s.answerFromRow(ctx, "read_marker", id, d.Hash)
	}
	// The flaw: the marker is made durable before the effect exists.
	if err := s.commit(ctx); err != nil {
		return Reply{}, err
	}
	if err := s.step(ctx, StepMarkerCommitted); err != nil {
		return Reply{}, err
	}
	if err := s.begin(ctx); err != nil {
		return Reply{}, err
	}
	return s.effectSaveCommit(ctx, d, id)
}

func deliverEffectBeforeMarker(ctx context.Context, s *session, d delivery) (Reply, error) {
	id := []any{d.Tenant, d.OperationID}
	if err := s.step(ctx, StepBeforeCall); err != nil {
		return Reply{}, err
	}
	if err := s.begin(ctx); err != nil {
		return Reply{}, err
	}
	var hash string
	var stored json.RawMessage
	err := s.queryRow(ctx, "read_marker", id, &hash, &stored)
	found := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Reply{}, err
	}
	if err := s.step(ctx, StepAfterCheck); err != nil {
		return Reply{}, err
	}
	if found {
		if err := s.commit(ctx); err != nil {
			return Reply{}, err
		}
		return answerStored(d.Hash, hash, stored), nil
	}
	resp, err := s.effect(ctx, d)
	if err != nil {
		return Reply{}, err
	}
	// The flaw: the effect is made durable before anything records it.
	if err := s.commit(ctx); err != nil {
		return Reply{}, err
	}
	if err := s.step(ctx, StepEffectCommitted); err != nil {
		return Reply{}, err
	}
	if err := s.begin(ctx); err != nil {
		return Reply{}, err
	}
	if _, err := s.exec(ctx, "insert_marker", d.Tenant, d.OperationID, d.Hash, string(resp)); err != nil {
		return Reply{}, err
	}
	if err := s.step(ctx, StepAfterMarker); err != nil {
		return Reply{}, err
	}
	if err := s.commitFinal(ctx); err != nil {
		return Reply{}, err
	}
	return Reply{Outcome: OutcomeApplied, Response: resp}, nil
}

func deliverNonatomicCheck(ctx context.Context, s *session, d delivery) (Reply, error) {
	id := []any{d.Tenant, d.OperationID}
	if err := s.beginAt(ctx); err != nil {
		return Reply{}, err
	}
	var hash string
	var stored json.RawMessage
	err := s.queryRow(ctx, "check", id, &hash, &stored)
	found := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Reply{}, err
	}
	if err := s.step(ctx, StepAfterCheck); err != nil {
		return Reply{}, err
	}
	if found {
		if err := s.commit(ctx); err != nil {
			return Reply{}, err
		}
		return answerStored(d.Hash, hash, stored), nil
	}
	tag, err := s.exec(ctx, "insert", d.Tenant, d.OperationID, d.Hash)
	if err != nil {
		return Reply{}, err
	}
	if err := s.step(ctx, StepAfterMarker); err != nil {
		return Reply{}, err
	}
	if tag.RowsAffected() == 0 {
		// The flaw: the payload was "already checked", so the row that won the
		// insert is taken to be this command's own.
		if err := s.queryRow(ctx, "read_response", id, &stored); err != nil {
			return Reply{}, err
		}
		if err := s.commit(ctx); err != nil {
			return Reply{}, err
		}
		return Reply{Outcome: OutcomeAlreadyApplied, Response: stored}, nil
	}
	return s.effectSaveCommit(ctx, d, id)
}

// effectSaveCommit is the end every marker design shares once it decided the
// operation is new: the effect, the saved response, COMMIT, with a kill point
// between each step.
func (s *session) effectSaveCommit(ctx context.Context, d delivery, id []any) (Reply, error) {
	resp, err := s.effect(ctx, d)
	if err != nil {
		return Reply{}, err
	}
	if _, err := s.exec(ctx, "save_response", append(id[:len(id):len(id)], string(resp))...); err != nil {
		return Reply{}, err
	}
	if err := s.step(ctx, StepBeforeCommit); err != nil {
		return Reply{}, err
	}
	if err := s.commitFinal(ctx); err != nil {
		return Reply{}, err
	}
	return Reply{Outcome: OutcomeApplied, Response: resp}, nil
}
