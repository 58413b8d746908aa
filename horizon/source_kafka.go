package horizon

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// probeKafka probes a topic (a DLQ or a live topic within its retention).
//   - bounding: the oldest replayable message is the earliest record
//     timestamp in the topic (the evidence also keeps retention.ms, the
//     timestamp type and the offsets). Only under LogAppendTime do
//     timestamps grow with offsets, so that a partition's first record is
//     its oldest; under CreateTime (Kafka's default, and what a dead-letter
//     reporter that keeps the original record's time produces) a later
//     record can be older, so every record up to the end offsets is read;
//   - enumerating: every record between the start and end offsets at probe
//     time is read and its identity headers pinned. A record without them
//     fails the proof. The record's value is the operation's payload (intake
//     reads it).
func probeKafka(ctx context.Context, s Source, env *probeEnv) (observation, error) {
	c := s.Config
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.RequestRetries(1),
		kgo.RetryTimeout(5*time.Second), kgo.ClientID("idemctl-horizon"))
	if err != nil {
		return observation{}, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	detail := map[string]any{}
	cfgs, err := adm.DescribeTopicConfigs(ctx, c.Topic)
	if err != nil {
		return observation{}, fmt.Errorf("topic %s config: %w", c.Topic, err)
	}
	rc, err := cfgs.On(c.Topic, nil)
	if err != nil {
		return observation{}, fmt.Errorf("topic %s config: %w", c.Topic, err)
	}
	if rc.Err != nil {
		return observation{}, fmt.Errorf("topic %s config: %w", c.Topic, rc.Err)
	}
	appendTime := false
	for _, kv := range rc.Configs {
		if kv.Key == "message.timestamp.type" && kv.Value != nil {
			appendTime = *kv.Value == "LogAppendTime"
			detail["timestamp_type"] = *kv.Value
		}
		if kv.Key == "retention.ms" && kv.Value != nil {
			ms, err := strconv.ParseInt(*kv.Value, 10, 64)
			if err != nil || ms < -1 {
				return observation{}, fmt.Errorf("nonsense: topic %s retention.ms %q", c.Topic, *kv.Value)
			}
			detail["retention_ms"] = ms
		}
	}
	starts, err := adm.ListStartOffsets(ctx, c.Topic)
	if err != nil {
		return observation{}, fmt.Errorf("topic %s start offsets: %w", c.Topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, c.Topic)
	if err != nil {
		return observation{}, fmt.Errorf("topic %s end offsets: %w", c.Topic, err)
	}
	if err := starts.Error(); err != nil {
		return observation{}, fmt.Errorf("topic %s start offsets: %w", c.Topic, err)
	}
	if err := ends.Error(); err != nil {
		return observation{}, fmt.Errorf("topic %s end offsets: %w", c.Topic, err)
	}
	if len(starts[c.Topic]) == 0 {
		return observation{}, fmt.Errorf("topic %s: no partitions (does it exist?)", c.Topic)
	}
	// Partitions with records, and where each ends at probe time.
	from := map[int32]kgo.Offset{}
	until := map[int32]int64{}
	parts := map[string]any{}
	for p, so := range starts[c.Topic] {
		eo := ends[c.Topic][p]
		parts[strconv.Itoa(int(p))] = map[string]int64{"start": so.Offset, "end": eo.Offset}
		if eo.Offset > so.Offset {
			from[p] = kgo.NewOffset().At(so.Offset)
			until[p] = eo.Offset
		}
	}
	detail["partitions"] = parts
	mode := c.mode()
	obs := observation{mode: mode, detail: detail}
	if len(from) == 0 {
		return obs, nil
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.ClientID("idemctl-horizon"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.Topic: from}))
	if err != nil {
		return observation{}, fmt.Errorf("kafka consumer: %w", err)
	}
	defer consumer.Close()
	for len(until) > 0 {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			return observation{}, ctx.Err()
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			return observation{}, fmt.Errorf("topic %s partition %d: %w", c.Topic, errs[0].Partition, errs[0].Err)
		}
		var failure error
		fetches.EachRecord(func(r *kgo.Record) {
			end, open := until[r.Partition]
			if failure != nil || !open {
				return
			}
			if r.Timestamp.UnixMilli() <= 0 {
				failure = fmt.Errorf("nonsense: topic %s partition %d offset %d has timestamp %v", c.Topic, r.Partition, r.Offset, r.Timestamp)
				return
			}
			ts := r.Timestamp
			if obs.oldest == nil || ts.Before(*obs.oldest) {
				obs.oldest = &ts
			}
			if mode == Bounding {
				// Under LogAppendTime the earliest offset's timestamp is the
				// partition's bound; otherwise read on to the end offset.
				if appendTime || r.Offset+1 >= end {
					delete(until, r.Partition)
				}
				return
			}
			var tenant, op string
			for _, h := range r.Headers {
				switch h.Key {
				case c.tenantHeader():
					tenant = string(h.Value)
				case c.operationHeader():
					op = string(h.Value)
				}
			}
			if (tenant == "" || op == "") && !env.lenient {
				failure = fmt.Errorf("nonsense: topic %s partition %d offset %d has no %s/%s headers: it could replay anything",
					c.Topic, r.Partition, r.Offset, c.tenantHeader(), c.operationHeader())
				return
			}
			m := Message{Tenant: tenant, OperationID: op, TS: &ts,
				At: fmt.Sprintf("topic %s partition %d offset %d", c.Topic, r.Partition, r.Offset)}
			if len(r.Value) > 0 {
				m.Payload = bytes.Clone(r.Value)
			}
			if err := env.pin(ctx, m); err != nil {
				failure = fmt.Errorf("topic %s partition %d offset %d: %w", c.Topic, r.Partition, r.Offset, err)
				return
			}
			obs.enumerated++
			if r.Offset+1 >= end {
				delete(until, r.Partition)
			}
		})
		if failure != nil {
			return observation{}, failure
		}
	}
	return obs, nil
}
