package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/redrive"
)

// Durable is the name of the reference service's JetStream consumer.
const Durable = "idemctl-demo-serve"

// A killed service leaves its pull request open on the server until it
// expires, and a message delivered to it waits for the ack deadline before
// it is redelivered: both short, so that a restarted service picks up what
// was published while it was down within seconds. A transfer takes
// milliseconds; a redelivery of one still running is answered by the inbox.
const (
	pullExpiry = 5 * time.Second
	ackWait    = 10 * time.Second
)

// ConsumeNATS processes the transfers published on subject, from the
// JetStream stream (created, with a de-duplication window, when missing),
// until ctx ends. A message carries the tenant and the operation id in the
// Idem-Tenant and Idem-Operation headers and the payload as its body. It is
// acknowledged once its outcome is committed (applied, already applied, or
// quarantined as a conflict); a failure is redelivered; a bad message is
// dropped.
// ready is called once the consumer receives messages.
func (s *Service) ConsumeNATS(ctx context.Context, url, stream, subject string, ready func()) error {
	nc, err := nats.Connect(url, nats.Name("idemctl demo serve"))
	if err != nil {
		return fmt.Errorf("connect to NATS %s: %w", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Duplicates: 10 * time.Minute})
	if err != nil {
		return fmt.Errorf("stream %s: %w", stream, err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: Durable, FilterSubject: subject,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait})
	if err != nil {
		return fmt.Errorf("consumer %s: %w", Durable, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) { s.handleMsg(ctx, m) }, jetstream.PullExpiry(pullExpiry))
	if err != nil {
		return fmt.Errorf("consume %s: %w", subject, err)
	}
	defer cc.Stop()
	ready()
	<-ctx.Done()
	return nil
}

func (s *Service) handleMsg(ctx context.Context, m jetstream.Msg) {
	h := m.Headers()
	id := idem.Identity{TenantID: h.Get(redrive.DefaultTenantHeader), OperationID: h.Get(redrive.OperationHeader)}
	if err := id.Validate(); err != nil {
		s.logf("nats: dropping a message without a valid identity: %v", err)
		_ = m.Term()
		return
	}
	if s.Faults.AckWithoutRecord && s.firstTime(id) {
		s.logf("fault: acknowledging %s without recording it", id)
		_ = m.Ack()
		return
	}
	res, err := s.Transfer(ctx, id, m.Data())
	switch {
	case err != nil && isBadRequest(err):
		s.logf("nats: dropping %s: %v", id, err)
		_ = m.Term()
	case err != nil && errors.Is(err, context.Canceled):
		_ = m.Nak()
	case err != nil:
		s.logf("nats: %s failed, to be redelivered: %v", id, err)
		_ = m.NakWithDelay(200 * time.Millisecond)
	default:
		s.logf("nats: %s: %s", id, res.Outcome)
		_ = m.Ack()
	}
}
