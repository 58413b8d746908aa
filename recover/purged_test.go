package recovery_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	recovery "github.com/idemctl/idemctl/recover"
)

// TestPurgedIdentities: after a proven purge, a dry run and a real run of a
// purged identity answer purged (same payload) or a conflict (another), and
// nothing runs again.
func TestPurgedIdentities(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	for _, sql := range []string{
		`CREATE FUNCTION public.count_effect(t text, o text, p jsonb) RETURNS jsonb LANGUAGE sql
		 AS $$ INSERT INTO public.effects VALUES (t, o) RETURNING jsonb_build_object('ok', true) $$`,
		"SELECT idem.inbox_body_ensure(current_date - 20, current_date)",
		`INSERT INTO idem.inbox (tenant_id, operation_id, op_class, payload_hash, payload, response, created_at)
		 SELECT 't1', 'old-' || g, 'proj.count', 'jcs-sha256:' || encode(sha256(convert_to('{"n":' || g || '}', 'UTF8')), 'hex'),
		        ('{"n":' || g || '}')::jsonb, '{"ok":true}', now() - interval '10 days' + g * interval '1 hour'
		 FROM generate_series(1, 5) g`,
	} {
		if strings.Contains(sql, "count_effect") {
			_, err := b.pool.Exec(b.ctx, "CREATE TABLE public.effects (t text, o text)")
			require.NoError(t, err)
		}
		_, err := b.pool.Exec(b.ctx, sql)
		require.NoError(t, err, sql)
	}
	_, err := b.pool.Exec(b.ctx, "SELECT idem.register_class('proj.count', 'public.count_effect(text,text,jsonb)'::regprocedure, 'horizon')")
	require.NoError(t, err)

	var now time.Time
	require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT now()").Scan(&now))
	p, err := horizon.MakePlan(b.ctx, b.pool, horizon.PlanOptions{Class: "proj.count", Before: now.Add(-24 * time.Hour), Operator: "alice"})
	require.NoError(t, err)
	_, err = horizon.Approve(b.ctx, b.pool, p.ID, "bob")
	require.NoError(t, err)
	r, err := horizon.Purge(b.ctx, b.pool, p.ID, horizon.PurgeOptions{Operator: "carol"})
	require.NoError(t, err)
	require.EqualValues(t, 5, r.Plan.Purged)

	lines := func(n int) string {
		return fmt.Sprintf(`{"tenant":"t1","operation_id":"old-1","class":"proj.count","payload":{"n":%d}}`, n)
	}
	input := lines(1) + "\n" + lines(99) + "\n"

	_, dry, err := b.resolve(t, recovery.Config{DryRun: true}, input)
	require.NoError(t, err)
	assert.Equal(t, []recovery.Outcome{recovery.Purged, recovery.WouldConflict}, outcomes(dry))

	_, real, err := b.resolve(t, recovery.Config{}, input)
	require.NoError(t, err)
	assert.Equal(t, []recovery.Outcome{recovery.Purged, recovery.Conflict}, outcomes(real))
	assert.NotZero(t, real[1].QuarantineID)
	assert.Equal(t, 0, b.count(t, "SELECT count(*) FROM public.effects"), "a purged identity never runs again")
}
