package horizon

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNoMessages: the source cannot list the operations it holds (the
// built-in manual source, or a postgres source whose query returns only the
// oldest timestamp).
var ErrNoMessages = errors.New("the source does not list its operations")

// Message is one operation a replay source holds, as its enumerating reader
// sees it. The horizon proof pins its identity; intake (package reconcile)
// turns it into a line of a resolve batch.
type Message struct {
	Tenant      string
	OperationID string
	// TS is when the source recorded it (nil when it does not say).
	TS *time.Time
	// Payload is the operation's payload as the source holds it: a postgres
	// source's fourth column, an archived record's "payload", a stream
	// message's body. Nil when the source carries none.
	Payload []byte
	// At says where in the source the message is (file:line, stream
	// sequence, partition and offset, row number), for tracing.
	At string
	// Problem says why a message read by ReadMessages cannot be used (not
	// JSON, a NULL identity); it is still handed over, so that one bad
	// message does not stop the reading. Tenant and OperationID are empty
	// when the source's headers lack them: the body may carry them.
	Problem string
}

// ReadMessages reads every message the source holds, in the source's order,
// and calls fn for each; fn's error stops the read and is returned. Streams
// are read whole whatever their probe mode; a postgres source's query must
// return (tenant_id, operation_id, ts) or (tenant_id, operation_id, ts,
// payload), and its rows are read ordered by (tenant_id, operation_id, ts) so
// that "row N" names the same row again. A message that cannot be used is
// handed over with its Problem, not an error. Nothing is written anywhere.
func ReadMessages(ctx context.Context, s Source, fn func(context.Context, Message) error) error {
	switch s.Kind {
	case KindManual:
		return fmt.Errorf("%w: %s holds pending corrections, not messages", ErrNoMessages, s.Name)
	case KindNATS, KindKafka:
		s.Config.Mode = Enumerating
	}
	p, ok := probers[s.Kind]
	if !ok {
		return fmt.Errorf("%w %q: unknown kind %q", ErrInvalidSource, s.Name, s.Kind)
	}
	obs, err := p(ctx, s, &probeEnv{now: time.Now(), pin: fn, lenient: true})
	if err != nil {
		return fmt.Errorf("read source %s: %w", s.Name, err)
	}
	if obs.mode != Enumerating {
		return fmt.Errorf("%w: source %s's query returns only the oldest timestamp; give it a query returning "+
			"(tenant_id, operation_id, ts[, payload])", ErrNoMessages, s.Name)
	}
	return nil
}

// FindSource returns the source called name (the built-in manual one too).
func FindSource(ctx context.Context, q DBTX, name string) (Source, error) {
	sources, err := ListSources(ctx, q)
	if err != nil {
		return Source{}, err
	}
	for _, s := range sources {
		if s.Name == name {
			return s, nil
		}
	}
	return Source{}, fmt.Errorf("%w: %s", ErrSourceNotFound, name)
}
