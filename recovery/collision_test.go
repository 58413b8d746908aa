package recovery_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/recovery"
)

// TestDryRunAnswersAlikeWhenIdentitiesShareHashes: a dry run over an input
// of repeats, conflicts, escaped spellings and invalid lines answers every
// line as a model of exact identities says, and answers exactly the same
// (every field) when the input scan is made to give identities one hash or
// a few; the real run with one hash for all does what the dry run predicted.
func TestDryRunAnswersAlikeWhenIdentitiesShareHashes(t *testing.T) {
	t.Parallel()
	b := setup(t, 6)
	rng := rand.New(rand.NewPCG(3, 5))
	const ids = 40
	present := map[int]bool{}
	for k := range ids {
		if k%3 == 0 {
			_, err := idem.Execute(b.ctx, b.app, transfer("coll", fmt.Sprint("op-", k), k+1))
			require.NoError(t, err)
			present[k] = true
		}
	}
	esc := func(s string) string { return strings.ReplaceAll(s, "o", `\u006f`) }
	type model struct {
		id, amount int
		invalid    bool
	}
	var lines []string
	var models []model
	amounts := map[int]map[int]bool{}
	for range 300 {
		k := rng.IntN(ids)
		amount := k + 1
		if rng.IntN(5) == 0 {
			amount = k + 2
		}
		tenant, op := "coll", fmt.Sprint("op-", k)
		if rng.IntN(3) == 0 {
			tenant, op = esc(tenant), esc(op)
		}
		if rng.IntN(25) == 0 {
			lines = append(lines, fmt.Sprintf(`{"tenant":%q,"operation_id":%q,"class":"demo.transfer"}`, "coll", op))
			models = append(models, model{invalid: true})
			continue
		}
		lines = append(lines, fmt.Sprintf(`{"tenant":"%s","operation_id":"%s","class":"demo.transfer","payload":{"to":"bob","from":"alice","currency":"EUR","amount":%d}}`, tenant, op, amount))
		models = append(models, model{id: k, amount: amount})
		if amounts[k] == nil {
			amounts[k] = map[int]bool{}
		}
		amounts[k][amount] = true
	}
	input := strings.Join(lines, "\n")

	run := func(cfg recovery.Config, collide uint64) []recovery.Result {
		r := &recovery.Resolver{Pool: b.pool, Config: cfg}
		r.Operator = "tester"
		if collide > 0 {
			recovery.CollideIdentities(r, collide)
		}
		var mu sync.Mutex
		var out []recovery.Result
		_, err := r.Run(b.ctx, recovery.NDJSON(strings.NewReader(input), 1<<20), func(res recovery.Result) error {
			mu.Lock()
			defer mu.Unlock()
			out = append(out, res)
			return nil
		})
		require.NoError(t, err)
		require.Len(t, out, len(lines))
		return out
	}
	dry := recovery.Config{DryRun: true, BatchSize: 7, Concurrency: 3}
	plain := run(dry, 0)
	applied := map[int]int{}
	for i, m := range models {
		got := plain[i]
		var want recovery.Outcome
		switch {
		case m.invalid:
			want = recovery.Invalid
		case present[m.id] && m.amount == m.id+1:
			want = recovery.AlreadyApplied
		case present[m.id]:
			want = recovery.WouldConflict
		case len(amounts[m.id]) > 1:
			want = recovery.Conflict
		case applied[m.id] > 0:
			want = recovery.AlreadyApplied
			assert.Contains(t, got.Note, fmt.Sprintf("as line %d of this input", applied[m.id]))
		default:
			want, applied[m.id] = recovery.WouldApply, i+1
		}
		assert.Equal(t, want, got.Outcome, "line %d: %s", i+1, lines[i])
	}
	for _, n := range []uint64{1, 3} {
		assert.Equal(t, plain, run(dry, n), "the dry run with %d hash(es) for all identities", n)
	}

	real := run(recovery.Config{Concurrency: 3}, 1)
	for i, p := range plain {
		want := map[recovery.Outcome]recovery.Outcome{recovery.WouldApply: recovery.Applied, recovery.WouldConflict: recovery.Conflict}[p.Outcome]
		if want == "" {
			want = p.Outcome
		}
		assert.Equal(t, want, real[i].Outcome, "line %d: %s", i+1, lines[i])
	}
}
