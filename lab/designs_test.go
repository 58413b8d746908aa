package lab

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRedisServerMissingFailsLoudly: without a redis-server, a run that
// includes redis_inbox fails before it starts, and says what to do.
func TestRedisServerMissingFailsLoudly(t *testing.T) {
	t.Parallel()
	_, err := Run(context.Background(), Options{Designs: []string{"atomic", "redis_inbox"}, RedisServer: "/nonexistent/redis-server"})
	require.ErrorIs(t, err, ErrNoRedisServer)
	for _, want := range []string{"redis_inbox", "/nonexistent/redis-server", "apt-get install redis-server", "--designs"} {
		assert.Contains(t, err.Error(), want)
	}
}

// TestRedisServerRestartLosesWhatWasNotSaved runs the lab's own Redis server:
// a key set before SAVE survives a SIGKILL and restart, one set after does not.
func TestRedisServerRestartLosesWhatWasNotSaved(t *testing.T) {
	t.Parallel()
	bin, err := findRedisServer("")
	require.NoError(t, err, "the lab's redis design needs redis-server")
	ctx := context.Background()
	srv, err := startRedisServer(ctx, bin)
	require.NoError(t, err)
	defer srv.stop()
	cmds, err := loadRedisCommands("redis_inbox.redis")
	require.NoError(t, err)
	c := srv.client(cmds)
	_, err = c.do(ctx, "mark", "k1", "pending h1")
	require.NoError(t, err)
	_, err = c.do(ctx, "mark", "k1", "pending h2")
	require.ErrorIs(t, err, redis.Nil, "SET NX refuses a marked key")
	require.NoError(t, srv.snapshot(ctx))
	_, err = c.do(ctx, "mark", "k2", "pending h3")
	require.NoError(t, err)
	c.close()

	require.NoError(t, srv.crash(ctx))
	c = srv.client(cmds)
	defer c.close()
	v, err := c.do(ctx, "read", "k1")
	require.NoError(t, err)
	assert.Equal(t, "pending h1", v)
	_, err = c.do(ctx, "read", "k2")
	assert.True(t, errors.Is(err, redis.Nil), "k2 was written after the snapshot: %v", err)
}

func TestExplainEveryDesign(t *testing.T) {
	t.Parallel()
	for _, d := range designs {
		var b bytes.Buffer
		require.NoError(t, Explain(&b, d.Name))
		out := b.String()
		assert.Contains(t, out, "design "+d.Name+": "+d.Does)
		assert.Contains(t, out, "where it breaks: "+d.Breaks)
		assert.NotEmpty(t, d.Breaks, d.Name)
		for _, f := range []string{d.file, d.redisFile} {
			if f != "" {
				assert.Contains(t, out, "---- lab/"+f+" ----", d.Name)
			}
		}
	}
	var b bytes.Buffer
	require.NoError(t, Explain(&b, "redis_inbox"))
	assert.Contains(t, b.String(), "SET $1 $2 NX EX")
	assert.ErrorIs(t, Explain(&b, "nope"), ErrUnknownDesign)
}

// TestDeliveriesCarryTheirSituation checks what each kind of delivery keeps
// and changes of the command: identity, text, key, offset.
func TestDeliveriesCarryTheirSituation(t *testing.T) {
	t.Parallel()
	tr := NewWorkload(5, 1)[0]
	tr.TwinTenant, tr.Revision = "other", true
	of := func(kind string) delivery {
		d, err := deliveryOf(tr, kind)
		require.NoError(t, err)
		return d
	}
	first, retry, resent, repub, late := of(KindFirst), of(KindRetry), of(KindResent), of(KindRepublished), of(KindLate)
	assert.Equal(t, first.Hash, resent.Hash, "re-sent: the same canonical payload")
	assert.NotEqual(t, first.Raw, resent.Raw, "re-sent: another text")
	assert.NotEqual(t, first.Key, retry.Key, "a client minting keys gives the retry a new one")
	assert.Equal(t, first.Offset, retry.Offset, "the broker redelivers the same message")
	assert.Equal(t, first.Key, repub.Key)
	assert.NotEqual(t, first.Offset, repub.Offset, "republished: a new offset")
	assert.NotEqual(t, first.Topic, late.Topic, "the DLQ is another topic")
	assert.Equal(t, first.Hash, repub.Hash)

	twin := of(KindTwin)
	assert.Equal(t, "other", twin.Tenant)
	assert.Equal(t, first.OperationID, twin.OperationID)
	assert.Equal(t, first.Hash, twin.Hash, "another tenant, the same command text")

	rev := of(KindRevision)
	assert.Equal(t, tr.OperationID+"-rev2", rev.OperationID)
	assert.Equal(t, tr.OperationID, rev.RevisionOf)
	assert.NotEqual(t, first.Hash, rev.Hash)
	assert.Equal(t, of(KindConflicting).Key, of(KindConflicting).Key, "keys are reproducible")
}

// TestJudgeNewColumns judges a hand-made log: a false conflict, a lost
// revision, and postings under a client's key filed under the business identity.
func TestJudgeNewColumns(t *testing.T) {
	t.Parallel()
	tr := NewWorkload(5, 1)[0]
	tr.Revision, tr.TwinTenant = true, ""
	of := func(kind string) delivery {
		d, err := deliveryOf(tr, kind)
		require.NoError(t, err)
		return d
	}
	first, resent, rev := of(KindFirst), of(KindResent), of(KindRevision)
	applied := &Reply{Outcome: OutcomeApplied, Response: []byte(`{"posting_id":"p1"}`)}
	conflict := &Reply{Outcome: OutcomeConflict}
	log := [][]deliveryResult{{{d: first, reply: applied}, {d: resent, reply: conflict}, {d: rev, reply: conflict}}}
	// The ledger knows the operation by the first send's key only.
	postings := map[identityKey][]posting{{tr.Tenant, first.Key}: {{id: "p1", amount: tr.Amount}}}
	rep := judge([]Trial{tr}, log, []*killRecord{nil}, postings)
	assert.Equal(t, 0, rep.Lost, "found under its key")
	assert.Equal(t, 1, rep.FalseConflicts)
	assert.Equal(t, 1, rep.LostRevisions)
	assert.Equal(t, 2, rep.Identities)
	assert.Zero(t, rep.WrongResponse+rep.MissedConflicts+rep.Doubled)
}

// TestStaleRedisOfDeadRunsIsStopped plants a lab Redis server whose owner is
// gone: the next redis design stops it and removes its directory.
func TestStaleRedisOfDeadRunsIsStopped(t *testing.T) {
	t.Parallel()
	bin, err := findRedisServer("")
	require.NoError(t, err, "the lab's redis design needs redis-server")
	srv, err := startRedisServer(context.Background(), bin)
	require.NoError(t, err)
	defer srv.stop()
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	require.NoError(t, os.WriteFile(filepath.Join(srv.dir, redisOwnerFile), []byte(strconv.Itoa(dead.Process.Pid)), 0o600))

	assert.Contains(t, dropStaleRedis(), srv.dir)
	select {
	case <-srv.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the leftover redis-server is still running")
	}
	_, err = os.Stat(srv.dir)
	assert.True(t, os.IsNotExist(err), "directory removed: %v", err)

	live, err := startRedisServer(context.Background(), bin)
	require.NoError(t, err)
	defer live.stop()
	assert.NotContains(t, dropStaleRedis(), live.dir, "a live run's server is left alone")
}
