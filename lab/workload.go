package lab

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/idemctl/idemctl/idem"
)

// Trial is one business operation of the shared workload and what happens to
// it: a first attempt killed at a random point, then the deliveries a
// recovering system makes. Every design gets the same trials.
type Trial struct {
	Index       int
	Tenant      string
	OperationID string
	From, To    string
	Amount      int64
	// KillR picks the kill point of the first attempt among the design's own
	// steps: steps[int(KillR*len(steps))].
	KillR float64
	// ClaimPath makes the atomic design run the Core's three-call protocol
	// (claim, effect, complete) instead of the one-call execute.
	ClaimPath bool
	// Duplicate redelivers the same command after recovery (a broker redelivery).
	Duplicate bool
	// Concurrent sends a duplicate at the same moment as the recovery retry;
	// ConcurrentOther gives it another payload (same identity, other amount).
	Concurrent      bool
	ConcurrentOther bool
	// Conflicting sends a retry with the same identity and another amount.
	Conflicting bool
	// LateReplay redelivers the command from the dead-letter queue after the
	// simulated clock has passed the TTL of ttl_shorter_than_horizon.
	LateReplay bool

	// RetryTimesOut: the recovery retry is applied, but its reply comes after
	// the client gave up, and the client retries once more.
	RetryTimesOut bool
	// Resent re-sends the same command serialised by another library: the keys
	// in another order, other whitespace; the same canonical payload.
	Resent bool
	// Republished publishes the same command to the topic again (an outbox
	// relay run twice): a new offset, the same business identity.
	Republished bool
	// TwinTenant, when set, is another tenant that sends a command with the
	// same operation id and the same text (tenants name their accounts
	// themselves, so equal texts are common): another business operation.
	TwinTenant string
	// Revision follows the settlement with a correction of it (another
	// amount), a new operation of its own: RevisionID.
	Revision bool
	// KeySalt seeds the idempotency keys a client that mints a new key per
	// send would use (uuid_per_retry).
	KeySalt uint64
}

// Delivery kinds, in the order a trial sends them.
const (
	KindFirst        = "first"         // the first attempt, killed
	KindRetry        = "retry"         // the recovery retry: its reply was never received
	KindConcurrent   = "concurrent"    // a duplicate racing the recovery retry
	KindTimeoutRetry = "timeout_retry" // the client timed out on the retry and retried again
	KindDuplicate    = "duplicate"     // a redelivery of the same command
	KindConflicting  = "conflicting"   // same identity, another amount
	KindResent       = "resent"        // the same command, keys reordered, other whitespace
	KindRepublished  = "republished"   // the same command published again: a new offset
	KindTwin         = "other_tenant"  // another tenant's command with the same operation id
	KindRevision     = "revision"      // a settlement revision: a new operation
	KindLate         = "late"          // a replay from the DLQ after the TTL
)

// Workload probabilities: high enough that ~100 trials show every anomaly.
const (
	pDuplicate       = 0.5
	pConcurrent      = 0.4
	pConcurrentOther = 0.6
	pConflicting     = 0.3
	pLateReplay      = 0.3
	pRetryTimesOut   = 0.3
	pResent          = 0.3
	pRepublished     = 0.3
	pTwin            = 0.3
	pRevision        = 0.3
)

var tenants = []string{"acme", "globex", "initech", "umbrella"}

// NewWorkload returns n trials derived from seed alone (PCG), so that a run is
// reproducible apart from the timing of its kills. The situations added for
// the second set of designs come from a second stream, so that the first
// set's trials are the same as before they existed.
func NewWorkload(seed uint64, n int) []Trial {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	r2 := rand.New(rand.NewPCG(seed^0x2545f4914f6cdd1d, seed+0x632be59bd9b4e019))
	out := make([]Trial, n)
	for i := range out {
		out[i] = Trial{
			Index:       i,
			Tenant:      tenants[r.IntN(len(tenants))],
			OperationID: fmt.Sprintf("op-%06d", i),
			From:        fmt.Sprintf("a%06d", i),
			To:          fmt.Sprintf("b%06d", i),
			Amount:      100 + r.Int64N(99_900),
			KillR:       r.Float64(),
			ClaimPath:   r.IntN(2) == 1,
			Duplicate:   r.Float64() < pDuplicate,
			Concurrent:  r.Float64() < pConcurrent,
		}
		t := &out[i]
		t.ConcurrentOther = r.Float64() < pConcurrentOther
		t.Conflicting = r.Float64() < pConflicting
		t.LateReplay = r.Float64() < pLateReplay
		t.RetryTimesOut = r2.Float64() < pRetryTimesOut
		t.Resent = r2.Float64() < pResent
		t.Republished = r2.Float64() < pRepublished
		if r2.Float64() < pTwin {
			// Any tenant but the trial's own.
			t.TwinTenant = tenants[(indexOf(tenants, t.Tenant)+1+r2.IntN(len(tenants)-1))%len(tenants)]
		}
		t.Revision = r2.Float64() < pRevision
		t.KeySalt = r2.Uint64()
	}
	return out
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// operationKinds are the kinds of delivery that each bring a business
// operation of t: its own, the other tenant's, its settlement revision.
func (t Trial) operationKinds() []string {
	out := []string{KindFirst}
	if t.TwinTenant != "" {
		out = append(out, KindTwin)
	}
	if t.Revision {
		out = append(out, KindRevision)
	}
	return out
}

// redeliveryKinds are what arrives for t once it is recovered, in order.
func (t Trial) redeliveryKinds() []string {
	var out []string
	for _, k := range []struct {
		on   bool
		kind string
	}{{t.Duplicate, KindDuplicate}, {t.Conflicting, KindConflicting}, {t.Resent, KindResent},
		{t.Republished, KindRepublished}, {t.TwinTenant != "", KindTwin}, {t.Revision, KindRevision}} {
		if k.on {
			out = append(out, k.kind)
		}
	}
	return out
}

// identityOf is the business identity a delivery of kind for t is about.
func identityOf(t Trial, kind string) identityKey {
	switch kind {
	case KindTwin:
		return identityKey{t.TwinTenant, t.OperationID}
	case KindRevision:
		return identityKey{t.Tenant, t.RevisionID()}
	}
	return identityKey{t.Tenant, t.OperationID}
}

// RevisionID is the operation id of a trial's settlement revision: a new
// identity, as the quarantine's accept-as-new decision would give it.
func (t Trial) RevisionID() string { return t.OperationID + "-rev2" }

// delivery is one request as a design receives it.
type delivery struct {
	Trial       int    `json:"trial"`
	Kind        string `json:"kind"`
	Tenant      string `json:"tenant"`
	OperationID string `json:"operation_id"`
	Amount      int64  `json:"amount"`
	Raw         string `json:"raw"`     // the payload as the client wrote it
	Payload     string `json:"payload"` // canonical JSON
	Hash        string `json:"hash"`
	ClaimPath   bool   `json:"claim_path,omitempty"`
	// Key is the idempotency key of a client that mints one per send.
	Key string `json:"key"`
	// Topic, Partition and Offset are where the broker delivered the message.
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
	// RevisionOf is the operation a revision corrects ("" otherwise).
	RevisionOf string `json:"revision_of,omitempty"`
}

// message says which client send and which broker message a kind is: sends
// mint a new key (for a client that makes one per send), redeliveries carry
// the key of the message they repeat; a new message gets a new offset.
type message struct {
	keySlot, offsetSlot int
	dlq                 bool
}

var messages = map[string]message{
	KindFirst:        {keySlot: 0, offsetSlot: 0},
	KindRetry:        {keySlot: 1, offsetSlot: 0}, // the broker redelivers the unacknowledged message
	KindConcurrent:   {keySlot: 2, offsetSlot: 0}, // delivered to a second consumer in a rebalance
	KindTimeoutRetry: {keySlot: 3, offsetSlot: 0},
	KindDuplicate:    {keySlot: 1, offsetSlot: 0}, // a redelivery of the retry
	KindConflicting:  {keySlot: 4, offsetSlot: 1},
	KindResent:       {keySlot: 5, offsetSlot: 2},
	KindRepublished:  {keySlot: 0, offsetSlot: 3}, // the first message, published again
	KindTwin:         {keySlot: 6, offsetSlot: 4},
	KindRevision:     {keySlot: 7, offsetSlot: 5},
	KindLate:         {keySlot: 0, offsetSlot: 0, dlq: true}, // the first message, from the DLQ
}

// Topics of the simulated broker.
const (
	topicTransfers   = "ledger.transfers"
	topicTransferDLQ = "ledger.transfers.dlq"
	partitions       = 8
	offsetsPerTrial  = 8
)

// deliveryOf builds the request of kind for t, hashed with the Core's
// canonical hash (RFC 8785 + SHA-256).
func deliveryOf(t Trial, kind string) (delivery, error) {
	m, ok := messages[kind]
	if !ok {
		return delivery{}, fmt.Errorf("trial %d: unknown delivery kind %q", t.Index, kind)
	}
	id := identityOf(t, kind)
	d := delivery{Trial: t.Index, Kind: kind, Tenant: id.tenant, OperationID: id.op,
		Amount: amountOf(t, kind), ClaimPath: t.ClaimPath, Key: clientKey(t, m.keySlot),
		Topic: topicTransfers, Partition: t.Index % partitions, Offset: int64(t.Index*offsetsPerTrial + m.offsetSlot)}
	if m.dlq {
		d.Topic, d.Partition, d.Offset = topicTransferDLQ, 0, int64(t.Index)
	}
	extra := ""
	if kind == KindRevision {
		d.RevisionOf = t.OperationID
		extra = fmt.Sprintf(`,"revises":%q`, t.OperationID)
	}
	d.Raw = fmt.Sprintf(`{"from":%q,"to":%q,"amount":%d,"currency":"EUR"%s}`, t.From, t.To, d.Amount, extra)
	if kind == KindResent {
		d.Raw = fmt.Sprintf("{\n  \"currency\" : \"EUR\",\n  \"amount\" : %d,\n  \"to\" : %q,\n  \"from\" : %q\n}", d.Amount, t.To, t.From)
	}
	canonical, hash, err := idem.Canonicalize([]byte(d.Raw), idem.PayloadLimits{})
	if err != nil {
		return delivery{}, fmt.Errorf("payload of trial %d: %w", t.Index, err)
	}
	d.Payload, d.Hash = string(canonical), hash
	return d, nil
}

// amountOf is the amount a delivery of kind carries for t.
func amountOf(t Trial, kind string) int64 {
	switch {
	case kind == KindConcurrent && t.ConcurrentOther:
		return t.Amount + 1
	case kind == KindConflicting:
		return t.Amount + 2
	case kind == KindRevision:
		return t.Amount/2 + 1 // the corrected payout
	}
	return t.Amount
}

// clientKey is the UUID a client that mints a new key per send gives its
// send number slot of t.
func clientKey(t Trial, slot int) string {
	var in [16]byte
	binary.BigEndian.PutUint64(in[:8], t.KeySalt)
	binary.BigEndian.PutUint64(in[8:], uint64(slot))
	b := sha256.Sum256(in[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
