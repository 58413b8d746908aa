package horizon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// probeNATS probes a JetStream stream used as a DLQ.
//   - bounding: the oldest message time is the stream state's first_ts (an
//     empty stream replays nothing);
//   - enumerating: every message up to the last sequence at probe time is
//     read with an ordered consumer, and the identity headers pinned. A
//     message without them fails the proof: it could replay anything. The
//     message's body is the operation's payload (intake reads it).
func probeNATS(ctx context.Context, s Source, env *probeEnv) (observation, error) {
	c := s.Config
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	nc, err := nats.Connect(c.URL, nats.Timeout(timeout), nats.NoReconnect(), nats.Name("idemctl horizon"))
	if err != nil {
		return observation{}, fmt.Errorf("connect to NATS %s: %w", c.URL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return observation{}, fmt.Errorf("JetStream: %w", err)
	}
	st, err := js.Stream(ctx, c.Stream)
	if err != nil {
		return observation{}, fmt.Errorf("stream %s: %w", c.Stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return observation{}, fmt.Errorf("stream %s info: %w", c.Stream, err)
	}
	state := info.State
	detail := map[string]any{"messages": state.Msgs, "first_seq": state.FirstSeq, "last_seq": state.LastSeq}
	var oldest *time.Time
	if state.Msgs > 0 {
		if state.FirstTime.IsZero() || state.FirstTime.Year() < 2000 {
			return observation{}, fmt.Errorf("nonsense: stream %s holds %d messages but reports first time %v", c.Stream, state.Msgs, state.FirstTime)
		}
		t := state.FirstTime
		oldest = &t
	}
	if c.mode() == Bounding {
		return observation{mode: Bounding, oldest: oldest, detail: detail}, nil
	}
	obs := observation{mode: Enumerating, oldest: oldest, detail: detail}
	if state.Msgs == 0 {
		return obs, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return observation{}, fmt.Errorf("stream %s consumer: %w", c.Stream, err)
	}
	last := state.LastSeq
	for {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return observation{}, fmt.Errorf("stream %s fetch: %w", c.Stream, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				return observation{}, fmt.Errorf("stream %s message metadata: %w", c.Stream, err)
			}
			tenant, op := m.Headers().Get(c.tenantHeader()), m.Headers().Get(c.operationHeader())
			if (tenant == "" || op == "") && !env.lenient {
				return observation{}, fmt.Errorf("nonsense: stream %s message %d has no %s/%s headers: it could replay anything",
					c.Stream, md.Sequence.Stream, c.tenantHeader(), c.operationHeader())
			}
			ts := md.Timestamp
			msg := Message{Tenant: tenant, OperationID: op, TS: &ts, At: fmt.Sprintf("stream %s sequence %d", c.Stream, md.Sequence.Stream)}
			if len(m.Data()) > 0 {
				msg.Payload = bytes.Clone(m.Data())
			}
			if err := env.pin(ctx, msg); err != nil {
				return observation{}, fmt.Errorf("stream %s message %d: %w", c.Stream, md.Sequence.Stream, err)
			}
			obs.enumerated++
			if md.Sequence.Stream >= last {
				return obs, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return observation{}, fmt.Errorf("stream %s fetch: %w", c.Stream, err)
		}
		if got == 0 {
			if ctx.Err() != nil {
				return observation{}, ctx.Err()
			}
			// Messages below last were deleted meanwhile: what is left was read.
			return obs, nil
		}
	}
}
