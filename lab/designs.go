package lab

import "context"

// design is one way of doing idempotency, as the lab runs it.
type design struct {
	Name string
	// Expect lists the anomaly columns this design exists to show (none for
	// atomic, and for projection_rebuild once rebuilt).
	Expect []string
	// Does says in a line what the design does; Summary what goes wrong.
	Does    string
	Summary string
	// Breaks names the step where the design breaks and why, for --explain.
	Breaks string
	file   string
	// core: the design calls the Core executor (execute, claim, complete),
	// so its scratch schema gets every migration and the code package; the
	// others get the ledger and their own tables alone.
	core bool
	// redisFile holds the Redis commands of a design that marks in Redis.
	redisFile string
	// raceStep is where two concurrent deliveries wait for each other, so that
	// they overlap at the design's weak point.
	raceStep string
	// raceAnswered: the second racer does not wait on a lock, it is answered
	// while the first is still in flight (its marker lives outside PostgreSQL).
	raceAnswered bool
	steps        func(t Trial) []string
	deliver      func(ctx context.Context, s *session, d delivery) (Reply, error)
	// expire is the statement run when the simulated clock jumps ("" for none).
	expire string
	// effect is the statement of the effect ("" for the ledger's, "effect");
	// ledger the statement that reads what it wrote ("" for "postings").
	effect string
	ledger string
	// publish writes the source a projection is rebuilt from, at install;
	// rebuild rebuilds the projection from it after the replays ("" for none).
	publish string
	rebuild string
}

// Kill points of the designs that share a shape.
var (
	markerSeparateSteps = []string{StepBeforeCall, StepAfterMarker, StepMarkerCommitted, StepDuringEffect,
		StepAfterEffect, StepBeforeCommit, StepCommitSent, StepBeforeReport}
	effectFirstSteps = []string{StepBeforeCall, StepAfterCheck, StepDuringEffect, StepAfterEffect,
		StepEffectCommitted, StepAfterMarker, StepCommitSent, StepBeforeReport}
	inboxSteps = []string{StepBeforeCall, StepAfterBegin, StepAfterMarker, StepDuringEffect,
		StepAfterEffect, StepBeforeCommit, StepCommitSent, StepBeforeReport}
	checkFirstSteps = []string{StepBeforeCall, StepAfterBegin, StepAfterCheck, StepAfterMarker, StepDuringEffect,
		StepAfterEffect, StepBeforeCommit, StepCommitSent, StepBeforeReport}
	redisSteps = []string{StepBeforeCall, StepAfterMarker, StepDuringEffect, StepAfterEffect,
		StepBeforeCommit, StepCommitSent, StepEffectCommitted, StepBeforeReport}
	executeSteps = []string{StepBeforeCall, StepAfterBegin, StepDuringEffect, StepBeforeCommit,
		StepCommitSent, StepBeforeReport}
)

func fixedSteps(steps []string) func(Trial) []string { return func(Trial) []string { return steps } }

// coreSteps are the atomic executor's: one call (execute), or claim, effect,
// complete.
func coreSteps(t Trial) []string {
	if t.ClaimPath {
		return inboxSteps
	}
	return executeSteps
}

var designs = []design{
	{
		Name:     "marker_separate_tx",
		Expect:   []string{AnomalyLost},
		Does:     "commits the dedup marker, then runs the effect in another transaction",
		Summary:  "the marker committed, the effect died with the worker: every retry is deduplicated",
		Breaks:   "killed at marker_committed (or inside the effect after it): the marker is durable, the effect never commits; every retry finds the marker",
		file:     "marker_separate_tx.sql",
		raceStep: StepBeforeCall,
		steps:    fixedSteps(markerSeparateSteps),
		deliver:  deliverMarkerSeparate,
	},
	{
		Name:     "effect_before_marker",
		Expect:   []string{AnomalyDoubled},
		Does:     "commits the effect, then writes the marker in another transaction",
		Summary:  "the effect committed, the worker died before the marker: the retry applied it again",
		Breaks:   "killed at effect_committed (or before the marker commits): the posting is durable, nothing records it; the retry finds no marker",
		file:     "effect_before_marker.sql",
		raceStep: StepAfterCheck,
		steps:    fixedSteps(effectFirstSteps),
		deliver:  deliverEffectBeforeMarker,
	},
	{
		Name:     "ttl_shorter_than_horizon",
		Expect:   []string{AnomalyDoubled},
		Does:     "atomic inbox whose entries expire after 24 h",
		Summary:  "the inbox entry expired after 24h, the DLQ replayed on day 7: applied again",
		Breaks:   "the sweeper (expire) deletes entries after 24 h of simulated time; the DLQ replays on day 7 and finds nothing",
		file:     "ttl_shorter_than_horizon.sql",
		raceStep: StepAfterBegin,
		steps:    fixedSteps(inboxSteps),
		deliver:  deliverInbox(businessIdentity, canonicalHash),
		expire:   "expire",
	},
	{
		Name:     "nonatomic_payload_check",
		Expect:   []string{AnomalyWrongResponse},
		Does:     "compares the payload in a SELECT, then inserts",
		Summary:  "two payloads passed the check together; the loser of the insert got the winner's response",
		Breaks:   "after_check: two requests with other payloads both find nothing; the loser of the insert returns the winner's response as its own",
		file:     "nonatomic_payload_check.sql",
		raceStep: StepAfterCheck,
		steps:    fixedSteps(checkFirstSteps),
		deliver:  deliverNonatomicCheck,
	},
	{
		Name:     "global_key",
		Expect:   []string{AnomalyLost, AnomalyWrongResponse},
		Does:     "atomic inbox keyed on operation_id alone, without the tenant",
		Summary:  "another tenant's operation with the same id was swallowed and answered with the first tenant's posting",
		Breaks:   "claim: the second tenant's INSERT hits the first tenant's row (ON CONFLICT (operation_id)); read returns its hash and response",
		file:     "global_key.sql",
		raceStep: StepAfterBegin,
		steps:    fixedSteps(inboxSteps),
		deliver:  deliverInbox(operationIDOnly, canonicalHash),
	},
	{
		Name:     "uuid_per_retry",
		Expect:   []string{AnomalyDoubled},
		Does:     "the atomic executor, but the client mints a new idempotency key for every send",
		Summary:  "the retry after a timeout carried a new key: the executor saw a new operation and applied it again",
		Breaks:   "the retry: its key is new, so execute claims a new identity and runs the effect a second time",
		file:     "atomic.sql",
		core:     true,
		raceStep: StepAfterBegin,
		steps:    coreSteps,
		deliver:  deliverUUIDPerRetry,
	},
	{
		Name:     "raw_json_compare",
		Expect:   []string{AnomalyFalseConflicts},
		Does:     "atomic inbox that hashes the raw request text instead of the canonical payload",
		Summary:  "the same command with its keys in another order was refused as a conflict",
		Breaks:   "read: the stored hash is of the first text; a re-serialised copy of the same command hashes otherwise",
		file:     "raw_json_compare.sql",
		raceStep: StepAfterBegin,
		steps:    fixedSteps(inboxSteps),
		deliver:  deliverInbox(businessIdentity, rawTextHash),
	},
	{
		Name:   "redis_inbox",
		Expect: []string{AnomalyLost, AnomalyDoubled},
		Does:   "marks the operation in Redis (SET NX EX), then applies the effect in PostgreSQL",
		Summary: "a crash between the marker and the commit lost the effect; " +
			"a Redis restart forgot markers of committed effects: applied again",
		Breaks: "after_marker: the marker is in Redis, the effect not committed, every retry sees the marker (lost); " +
			"Redis restarted from its last snapshot (no synced AOF): the markers written since are gone, the next redelivery applies again (doubled)",
		redisFile:    "redis_inbox.redis",
		raceStep:     StepBeforeCall,
		raceAnswered: true,
		steps:        fixedSteps(redisSteps),
		deliver:      deliverRedisInbox,
	},
	{
		Name:     "transport_identity",
		Expect:   []string{AnomalyDoubled},
		Does:     "atomic inbox keyed on the broker's (topic, partition, offset)",
		Summary:  "the same command published again got a new offset: applied again",
		Breaks:   "claim: a republished or DLQ-replayed command has a new (topic, partition, offset), so it is a new row",
		file:     "transport_identity.sql",
		raceStep: StepAfterBegin,
		steps:    fixedSteps(inboxSteps),
		deliver:  deliverInbox(transportPosition, canonicalHash),
	},
	{
		Name:     "revision_as_duplicate",
		Expect:   []string{AnomalyLostRevisions},
		Does:     "the atomic executor, but a settlement revision reuses the settlement's operation id",
		Summary:  "the corrected settlement was refused as a repeat of the original (conflict, quarantined) and never posted",
		Breaks:   "execute: the revision arrives under the settlement's identity with another payload, so it is a conflict, not a new operation",
		file:     "atomic.sql",
		core:     true,
		raceStep: StepAfterBegin,
		steps:    coreSteps,
		deliver:  deliverRevisionAsDuplicate,
	},
	{
		Name:     "projection_rebuild",
		Does:     "a projection fed through a 24 h TTL inbox, rebuilt from its source after the replays",
		Summary:  "the late replays doubled entries, and the rebuild from the event log put every total right",
		Breaks:   "expire, then the DLQ replays: doubled entries (doubled_before_rebuild); rebuild: the projection is recomputed from the event log",
		file:     "projection_rebuild.sql",
		raceStep: StepAfterBegin,
		steps:    fixedSteps(inboxSteps),
		deliver:  deliverInbox(businessIdentity, canonicalHash),
		expire:   "expire",
		effect:   "project",
		ledger:   "entries",
		publish:  "publish",
		rebuild:  "rebuild",
	},
	{
		Name:     "atomic",
		Does:     "the Core executor: inbox row, effect and saved response in one transaction",
		Summary:  "nothing broke (every column must stay at 0)",
		Breaks:   "nowhere: a crash anywhere leaves all three or none, and the unique key settles every race",
		file:     "atomic.sql",
		core:     true,
		raceStep: StepAfterBegin,
		steps:    coreSteps,
		deliver:  deliverAtomic,
	},
}

// ledgerStatement is the statement that reads what the design's effect wrote.
func (d design) ledgerStatement() string {
	if d.ledger != "" {
		return d.ledger
	}
	return "postings"
}
