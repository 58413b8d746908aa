package lab

import (
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
}

// Delivery kinds, in the order a trial sends them.
const (
	KindFirst       = "first"       // the first attempt, killed
	KindRetry       = "retry"       // the recovery retry: its reply was never received
	KindConcurrent  = "concurrent"  // a duplicate racing the recovery retry
	KindDuplicate   = "duplicate"   // a redelivery of the same command
	KindConflicting = "conflicting" // same identity, another amount
	KindLate        = "late"        // a replay from the DLQ after the TTL
)

// Workload probabilities: high enough that ~100 trials show every anomaly.
const (
	pDuplicate       = 0.5
	pConcurrent      = 0.4
	pConcurrentOther = 0.6
	pConflicting     = 0.3
	pLateReplay      = 0.3
)

var tenants = []string{"acme", "globex", "initech", "umbrella"}

// NewWorkload returns n trials derived from seed alone (PCG), so that a run is
// reproducible apart from the timing of its kills.
func NewWorkload(seed uint64, n int) []Trial {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
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
		out[i].ConcurrentOther = r.Float64() < pConcurrentOther
		out[i].Conflicting = r.Float64() < pConflicting
		out[i].LateReplay = r.Float64() < pLateReplay
	}
	return out
}

// delivery is one request as a design receives it.
type delivery struct {
	Trial       int    `json:"trial"`
	Kind        string `json:"kind"`
	Tenant      string `json:"tenant"`
	OperationID string `json:"operation_id"`
	Amount      int64  `json:"amount"`
	Payload     string `json:"payload"` // canonical JSON
	Hash        string `json:"hash"`
	ClaimPath   bool   `json:"claim_path,omitempty"`
}

// deliveryOf builds the request of kind for t with amount, hashed with the
// Core's canonical hash (RFC 8785 + SHA-256).
func deliveryOf(t Trial, kind string, amount int64) (delivery, error) {
	raw := fmt.Sprintf(`{"amount":%d,"currency":"EUR","from":%q,"to":%q}`, amount, t.From, t.To)
	canonical, hash, err := idem.Canonicalize([]byte(raw), idem.PayloadLimits{})
	if err != nil {
		return delivery{}, fmt.Errorf("payload of trial %d: %w", t.Index, err)
	}
	return delivery{
		Trial: t.Index, Kind: kind, Tenant: t.Tenant, OperationID: t.OperationID,
		Amount: amount, Payload: string(canonical), Hash: hash, ClaimPath: t.ClaimPath,
	}, nil
}

// Amounts of the deliveries that carry another payload than the trial's.
func concurrentAmount(t Trial) int64  { return t.Amount + 1 }
func conflictingAmount(t Trial) int64 { return t.Amount + 2 }
