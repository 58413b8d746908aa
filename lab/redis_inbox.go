package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Marker states of redis_inbox's values: "pending <hash>", "done <hash> <response>".
const (
	redisPending = "pending"
	redisDone    = "done"
)

// deliverRedisInbox marks the operation in Redis with SET NX, then runs the
// effect in a PostgreSQL transaction, then records the response in Redis:
// two systems, no transaction across them.
func deliverRedisInbox(ctx context.Context, s *session, d delivery) (Reply, error) {
	if s.redis == nil {
		return Reply{}, errors.New("redis_inbox: no Redis server")
	}
	key := "idem:" + d.Tenant + ":" + d.OperationID
	if err := s.step(ctx, StepBeforeCall); err != nil {
		return Reply{}, err
	}
	_, err := s.redis.do(ctx, "mark", key, redisPending+" "+d.Hash)
	marked := err == nil
	if err != nil && !errors.Is(err, redis.Nil) {
		return Reply{}, err
	}
	if err := s.step(ctx, StepAfterMarker); err != nil {
		return Reply{}, err
	}
	if !marked {
		return s.answerRedis(ctx, key, d)
	}
	if err := s.begin(ctx); err != nil {
		return Reply{}, err
	}
	resp, err := s.effect(ctx, d)
	if err != nil {
		return Reply{}, err
	}
	if err := s.step(ctx, StepBeforeCommit); err != nil {
		return Reply{}, err
	}
	if err := s.commitOrDie(ctx); err != nil {
		return Reply{}, err
	}
	if err := s.step(ctx, StepEffectCommitted); err != nil {
		return Reply{}, err
	}
	if _, err := s.redis.do(ctx, "record", key, redisDone+" "+d.Hash+" "+string(resp)); err != nil && !errors.Is(err, redis.Nil) {
		return Reply{}, err
	}
	if err := s.step(ctx, StepBeforeReport); err != nil {
		return Reply{}, err
	}
	return Reply{Outcome: OutcomeApplied, Response: resp}, nil
}

// answerRedis answers a delivery whose key was already marked: a pending
// marker is taken for an operation in flight or done (no response to give).
func (s *session) answerRedis(ctx context.Context, key string, d delivery) (Reply, error) {
	v, err := s.redis.do(ctx, "read", key)
	if err != nil {
		return Reply{}, fmt.Errorf("%s vanished between SET NX and GET: %w", key, err)
	}
	val, _ := v.(string)
	state, rest, _ := strings.Cut(val, " ")
	hash, resp, _ := strings.Cut(rest, " ")
	if state != redisPending && state != redisDone {
		return Reply{}, fmt.Errorf("redis_inbox: unexpected marker %q at %s", val, key)
	}
	var stored json.RawMessage
	if resp != "" {
		stored = json.RawMessage(resp)
	}
	return answerStored(d.Hash, hash, stored), nil
}
