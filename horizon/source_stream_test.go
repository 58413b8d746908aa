package horizon_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemctl/idemctl/horizon"
)

// natsURL is the NATS server on 127.0.0.1:4222 when one answers, else an
// in-process nats-server with JetStream in a temporary directory.
func natsURL(t *testing.T) string {
	t.Helper()
	if c, err := net.DialTimeout("tcp", "127.0.0.1:4222", 300*time.Millisecond); err == nil {
		c.Close()
		nc, err := nats.Connect("nats://127.0.0.1:4222", nats.Timeout(time.Second))
		if err == nil {
			defer nc.Close()
			if js, err := jetstream.New(nc); err == nil {
				if _, err := js.AccountInfo(context.Background()); err == nil {
					return "nats://127.0.0.1:4222"
				}
			}
		}
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second), "in-process nats-server")
	t.Cleanup(s.Shutdown)
	return s.ClientURL()
}

// natsStream creates a uniquely named stream, deleted at cleanup, and returns
// a publisher of messages carrying the given identity headers ("" for none).
func natsStream(t *testing.T, url string) (string, func(tenant, op string)) {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	name := fmt.Sprintf("IDEMCTL_TEST_%d", time.Now().UnixNano())
	ctx := context.Background()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return name, func(tenant, op string) {
		m := nats.NewMsg(name + ".dlq")
		m.Data = []byte(`{}`)
		if tenant != "" {
			m.Header.Set(horizon.DefaultTenantHeader, tenant)
			m.Header.Set(horizon.DefaultOperationHeader, op)
		}
		_, err := js.PublishMsg(ctx, m)
		require.NoError(t, err)
	}
}

func TestNATSSource(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(projClass, "t1", "op-", 10, 10*24*time.Hour, time.Minute)
	url := natsURL(t)
	stream, publish := natsStream(t, url)
	empty, _ := natsStream(t, url)
	publish("t1", "op-2")
	publish("t1", "op-5")
	publish("t9", "elsewhere")
	f.addSource(horizon.Source{Name: "nats-bound", Kind: horizon.KindNATS, Config: horizon.SourceConfig{URL: url, Stream: stream}})
	f.addSource(horizon.Source{Name: "nats-enum", Kind: horizon.KindNATS,
		Config: horizon.SourceConfig{URL: url, Stream: stream, Mode: horizon.Enumerating}})
	f.addSource(horizon.Source{Name: "nats-empty", Kind: horizon.KindNATS, Config: horizon.SourceConfig{URL: url, Stream: empty}})
	now := f.primaryNow()

	early := now.Add(-time.Hour)
	rep, err := horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &early})
	require.NoError(t, err)
	b := evidenceOf(t, rep, "nats-bound")
	assert.Equal(t, horizon.Bounding, b.Mode)
	assert.Equal(t, horizon.VerdictClosed, b.Verdict, b.Reason)
	require.NotNil(t, b.Oldest)
	assert.WithinDuration(t, time.Now(), *b.Oldest, time.Minute)
	e := evidenceOf(t, rep, "nats-enum")
	assert.Equal(t, horizon.Enumerating, e.Mode)
	assert.EqualValues(t, 3, e.Enumerated)
	assert.EqualValues(t, 2, e.Pinned)
	assert.Equal(t, horizon.VerdictClosed, evidenceOf(t, rep, "nats-empty").Verdict)
	assert.Nil(t, evidenceOf(t, rep, "nats-empty").Oldest)
	assert.True(t, rep.Proven)

	// A DLQ message not older than cutoff+margin blocks that cutoff.
	rep, err = horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &now})
	require.NoError(t, err)
	assert.Equal(t, horizon.VerdictOpen, evidenceOf(t, rep, "nats-bound").Verdict)
	assert.False(t, rep.Proven)

	// Failing probes: a message without identity headers, a missing stream,
	// an unreachable server.
	publish("", "")
	f.addSource(horizon.Source{Name: "nats-missing", Kind: horizon.KindNATS, Config: horizon.SourceConfig{URL: url, Stream: "NO_SUCH_STREAM_X"}})
	f.addSource(horizon.Source{Name: "nats-down", Kind: horizon.KindNATS, Timeout: 2 * time.Second,
		Config: horizon.SourceConfig{URL: "nats://127.0.0.1:1", Stream: stream}})
	rep, err = horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &early})
	require.NoError(t, err)
	for name, want := range map[string]string{"nats-enum": "no Idem-Tenant/Idem-Operation headers", "nats-missing": "NO_SUCH_STREAM_X", "nats-down": "connect"} {
		ev := evidenceOf(t, rep, name)
		assert.Equal(t, horizon.VerdictFailed, ev.Verdict, name)
		assert.Contains(t, ev.Reason, want, name)
	}
}

// Under CreateTime (the default) a later record can be older than the
// first: the bound is the true oldest, not the first record's time.
func TestKafkaBoundingFindsTheTrueOldest(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(projClass, "t1", "op-", 10, 10*24*time.Hour, time.Minute)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "skewed"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	recent := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	old := time.Now().Add(-9 * 24 * time.Hour).Truncate(time.Millisecond)
	for _, ts := range []time.Time{recent, old, recent.Add(time.Minute)} {
		// A dead-letter reporter keeps the original record's timestamp.
		require.NoError(t, cl.ProduceSync(f.ctx, &kgo.Record{Topic: "skewed", Value: []byte(`{}`), Timestamp: ts}).FirstErr())
	}
	f.addSource(horizon.Source{Name: "kafka-skewed", Kind: horizon.KindKafka,
		Config: horizon.SourceConfig{Brokers: c.ListenAddrs(), Topic: "skewed"}})
	before := f.primaryNow().Add(-2 * 24 * time.Hour)
	rep, err := horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &before})
	require.NoError(t, err)
	ev := evidenceOf(t, rep, "kafka-skewed")
	require.NotNil(t, ev.Oldest, ev.Reason)
	assert.WithinDuration(t, old, *ev.Oldest, time.Millisecond, "the oldest record, not the first")
	assert.Equal(t, horizon.VerdictOpen, ev.Verdict, "a message from 9 days ago blocks a cutoff 2 days ago")
	assert.False(t, rep.Proven)
}

func TestKafkaSource(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(projClass, "t1", "op-", 10, 10*24*time.Hour, time.Minute)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "dlq", "empty", "bad"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	old := time.Now().Add(-9 * 24 * time.Hour).Truncate(time.Millisecond)
	produce := func(topic, tenant, op string, ts time.Time) {
		r := &kgo.Record{Topic: topic, Value: []byte(`{}`), Timestamp: ts}
		if tenant != "" {
			r.Headers = []kgo.RecordHeader{{Key: horizon.DefaultTenantHeader, Value: []byte(tenant)},
				{Key: horizon.DefaultOperationHeader, Value: []byte(op)}}
		}
		require.NoError(t, cl.ProduceSync(f.ctx, r).FirstErr())
	}
	produce("dlq", "t1", "op-3", old)
	produce("dlq", "t1", "op-4", old.Add(time.Hour))
	produce("dlq", "t1", "op-8", time.Now())
	produce("bad", "", "", time.Now())
	f.addSource(horizon.Source{Name: "kafka-bound", Kind: horizon.KindKafka, Config: horizon.SourceConfig{Brokers: brokers, Topic: "dlq"}})
	f.addSource(horizon.Source{Name: "kafka-enum", Kind: horizon.KindKafka,
		Config: horizon.SourceConfig{Brokers: brokers, Topic: "dlq", Mode: horizon.Enumerating}})
	f.addSource(horizon.Source{Name: "kafka-empty", Kind: horizon.KindKafka, Config: horizon.SourceConfig{Brokers: brokers, Topic: "empty"}})
	now := f.primaryNow()

	early := now.Add(-15 * 24 * time.Hour)
	rep, err := horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &early})
	require.NoError(t, err)
	b := evidenceOf(t, rep, "kafka-bound")
	assert.Equal(t, horizon.Bounding, b.Mode)
	assert.Equal(t, horizon.VerdictClosed, b.Verdict, b.Reason)
	require.NotNil(t, b.Oldest)
	assert.WithinDuration(t, old, *b.Oldest, time.Millisecond, "the earliest offset's timestamp")
	e := evidenceOf(t, rep, "kafka-enum")
	assert.Equal(t, horizon.Enumerating, e.Mode)
	assert.EqualValues(t, 3, e.Enumerated)
	assert.Equal(t, horizon.VerdictClosed, evidenceOf(t, rep, "kafka-empty").Verdict)
	assert.True(t, rep.Proven)

	// The DLQ holds a message from 9 days ago: a cutoff 1 day ago is blocked
	// by the bounding proof; the enumerating one pins the identities instead.
	late := now.Add(-24 * time.Hour)
	rep, err = horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &late})
	require.NoError(t, err)
	assert.Equal(t, horizon.VerdictOpen, evidenceOf(t, rep, "kafka-bound").Verdict)
	assert.EqualValues(t, 3, evidenceOf(t, rep, "kafka-enum").Pinned)
	f.removeSource("kafka-bound")
	p, err := horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: projClass, Before: late, Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	require.Len(t, p.RemovedSources, 1, "the plan shows the source removed since the class's last purge")
	assert.Equal(t, "kafka-bound", p.RemovedSources[0].Target)
	assert.EqualValues(t, 3, p.Pinned)
	assert.EqualValues(t, 7, p.Candidates)

	// Failing probes: a record without identity headers, a missing topic, no broker.
	f.addSource(horizon.Source{Name: "kafka-bad", Kind: horizon.KindKafka,
		Config: horizon.SourceConfig{Brokers: brokers, Topic: "bad", Mode: horizon.Enumerating}})
	f.addSource(horizon.Source{Name: "kafka-missing", Kind: horizon.KindKafka, Timeout: 5 * time.Second,
		Config: horizon.SourceConfig{Brokers: brokers, Topic: "nope"}})
	f.addSource(horizon.Source{Name: "kafka-down", Kind: horizon.KindKafka, Timeout: 2 * time.Second,
		Config: horizon.SourceConfig{Brokers: []string{"127.0.0.1:1"}, Topic: "dlq"}})
	rep, err = horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &early})
	require.NoError(t, err)
	assert.Contains(t, evidenceOf(t, rep, "kafka-bad").Reason, "headers")
	for _, name := range []string{"kafka-bad", "kafka-missing", "kafka-down"} {
		ev := evidenceOf(t, rep, name)
		assert.Equal(t, horizon.VerdictFailed, ev.Verdict, name)
		assert.NotEmpty(t, ev.Reason, name)
	}
	assert.False(t, rep.Proven)
}

func TestArchiveSource(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(projClass, "t1", "op-", 10, 10*24*time.Hour, time.Minute)
	dir := t.TempDir()
	writeArchive(t, dir+"/2026-11-01.ndjson", false,
		`{"tenant":"t1","operation_id":"op-1","ts":"2026-11-01T10:00:00Z"}`,
		``,
		`{"tenant":"t1","operation_id":"op-2","ts":"2026-11-01T11:00:00Z","payload":{"x":1}}`)
	writeArchive(t, dir+"/sub/2026-11-02.ndjson.gz", true,
		`{"tenant":"t1","operation_id":"op-3","ts":"2026-11-02T10:00:00Z"}`,
		`{"tenant":"t7","operation_id":"unknown","ts":"2026-11-02T10:00:00Z"}`)
	writeArchive(t, dir+"/README.txt", false, "not an archive file")
	f.addSource(horizon.Source{Name: "archive", Kind: horizon.KindArchive, Config: horizon.SourceConfig{Dir: dir}})
	before := f.primaryNow().Add(-time.Hour)
	rep, err := horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &before})
	require.NoError(t, err)
	a := evidenceOf(t, rep, "archive")
	assert.Equal(t, horizon.Enumerating, a.Mode)
	assert.Equal(t, horizon.VerdictClosed, a.Verdict, a.Reason)
	assert.EqualValues(t, 4, a.Enumerated)
	assert.EqualValues(t, 3, a.Pinned)
	require.NotNil(t, a.Oldest)
	assert.Equal(t, "2026-11-01T10:00:00Z", a.Oldest.UTC().Format(time.RFC3339))

	// Nonsense fails the proof with the file and line; so does a missing dir.
	writeArchive(t, dir+"/2026-11-03.ndjson", false, `{"tenant":"t1","operation_id":"op-4"}`, `{"tenant":"","operation_id":"x"}`)
	f.addSource(horizon.Source{Name: "gone", Kind: horizon.KindArchive, Config: horizon.SourceConfig{Dir: dir + "/nope"}})
	rep, err = horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &before})
	require.NoError(t, err)
	a = evidenceOf(t, rep, "archive")
	assert.Equal(t, horizon.VerdictFailed, a.Verdict)
	assert.Contains(t, a.Reason, "2026-11-03.ndjson:2")
	assert.Equal(t, horizon.VerdictFailed, evidenceOf(t, rep, "gone").Verdict)
	_, err = horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: projClass, Before: before, Operator: "alice", AcceptUnbounded: true})
	assert.ErrorIs(t, err, horizon.ErrNotProven)
}

func writeArchive(t *testing.T, path string, gz bool, lines ...string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	for _, l := range lines {
		_, _ = io.WriteString(w, l+"\n")
	}
	if zw != nil {
		require.NoError(t, zw.Close())
	}
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
}

// ReadMessages reads every message of a stream whatever its probe mode,
// with the body as the payload (nil when empty), for intake.
func TestReadMessagesFromStreams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	collect := func(s horizon.Source) []horizon.Message {
		t.Helper()
		var got []horizon.Message
		require.NoError(t, horizon.ReadMessages(ctx, s, func(_ context.Context, m horizon.Message) error {
			got = append(got, m)
			return nil
		}))
		return got
	}

	url := natsURL(t)
	stream, _ := natsStream(t, url)
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	for i, body := range []string{`{"amount":1}`, ``} {
		m := nats.NewMsg(stream + ".dlq")
		m.Data = []byte(body)
		m.Header.Set(horizon.DefaultTenantHeader, "t1")
		m.Header.Set(horizon.DefaultOperationHeader, fmt.Sprintf("op-%d", i))
		_, err := js.PublishMsg(ctx, m)
		require.NoError(t, err)
	}
	got := collect(horizon.Source{Name: "nats", Kind: horizon.KindNATS, Config: horizon.SourceConfig{URL: url, Stream: stream}})
	require.Len(t, got, 2)
	assert.Equal(t, "op-0", got[0].OperationID)
	assert.Equal(t, `{"amount":1}`, string(got[0].Payload))
	assert.Nil(t, got[1].Payload)
	assert.Contains(t, got[1].At, "sequence 2")

	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "dlq"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "dlq", Value: []byte(`{"amount":2}`), Headers: []kgo.RecordHeader{
		{Key: horizon.DefaultTenantHeader, Value: []byte("t1")}, {Key: horizon.DefaultOperationHeader, Value: []byte("op-9")}}}).FirstErr())
	got = collect(horizon.Source{Name: "kafka", Kind: horizon.KindKafka, Config: horizon.SourceConfig{Brokers: c.ListenAddrs(), Topic: "dlq"}})
	require.Len(t, got, 1)
	assert.Equal(t, `{"amount":2}`, string(got[0].Payload))
	assert.Equal(t, "topic dlq partition 0 offset 0", got[0].At)

	dir := t.TempDir()
	writeArchive(t, dir+"/a.ndjson", false, `{"tenant":"t1","operation_id":"op-1","payload":{"x":1}}`, `{"tenant":"t1","operation_id":"op-2","payload":null}`)
	got = collect(horizon.Source{Name: "archive", Kind: horizon.KindArchive, Config: horizon.SourceConfig{Dir: dir}})
	require.Len(t, got, 2)
	assert.JSONEq(t, `{"x":1}`, string(got[0].Payload))
	assert.Nil(t, got[1].Payload)
	assert.Equal(t, dir+"/a.ndjson:2", got[1].At)

	err = horizon.ReadMessages(ctx, horizon.Source{Name: horizon.ManualSource, Kind: horizon.KindManual}, nil)
	assert.ErrorIs(t, err, horizon.ErrNoMessages)
}
