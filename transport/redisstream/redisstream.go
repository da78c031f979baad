// Package redisstream is the Redis Streams transport of taskorch workers (see package
// transport for the contract, docs/transports.md for how it compares).
//
// Task ids are entries of one stream, read by the workers through one consumer group
// (XREADGROUP with BLOCK, in batches) and acknowledged with XACK once the task's outcome is
// committed. Entries left pending by a dead consumer are taken over with XAUTOCLAIM once idle
// longer than the hold; the stream is trimmed (MINID, below the oldest entry still pending or
// undelivered, and a MAXLEN ~ bound at XADD).
//
//	tr, err := redisstream.New(redisstream.Config{URL: os.Getenv("REDIS_URL")})
//	if err != nil {
//		return err // a malformed URL; the password is never quoted
//	}
//	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Transport: tr, Handlers: hs})
package redisstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskorch/taskorch/transport"
)

// Name is the transport's name (Transport.Name), as in TASKORCH_TRANSPORT.
const Name = "redis"

// Defaults of Config.
const (
	DefaultStream = "taskorch:tasks"
	DefaultGroup  = "taskorch"
	DefaultBlock  = time.Second
	DefaultMaxLen = 1_000_000
)

// deadConsumerIdle: a consumer with nothing pending, silent this long, is removed from the group.
const deadConsumerIdle = time.Hour

// Config configures a Transport. Only URL is required.
type Config struct {
	// URL is the Redis URL: redis://[user:password@]host:port[/db], or rediss:// for TLS.
	URL string
	// Stream is the stream's key. Defaults to DefaultStream. Workers that run different task
	// types (each claims only those it runs: docs/transports.md, "Limits") need a stream (or a
	// database) per fleet.
	Stream string
	// Group is the consumer group. Defaults to DefaultGroup.
	Group string
	// Block bounds one XREADGROUP wait. Defaults to DefaultBlock.
	Block time.Duration
	// MaxLen bounds the stream at XADD (MAXLEN ~): a safety net above what trimming keeps.
	// Defaults to DefaultMaxLen.
	MaxLen int64
}

// Transport is the Redis Streams transport. Make it with New; a worker opens it (Open) with
// its id as the consumer name and the hold its lease needs.
type Transport struct {
	cfg Config
	rdb *redis.Client

	// Set by Open.
	consumer string
	hold     time.Duration
	log      *slog.Logger

	mu        sync.Mutex
	opened    bool
	groupOK   bool      // the consumer group is known to exist
	lastSweep time.Time // last XAUTOCLAIM / trim pass
	cursor    string    // XAUTOCLAIM's cursor over the pending entries
}

var _ transport.Transport = (*Transport)(nil)

// parseURL checks a Redis URL. Its errors never quote the URL, which may hold a password.
func parseURL(raw string) (*redis.Options, error) {
	if raw == "" {
		return nil, errors.New("the redis transport needs a Redis URL (redis://[user:password@]host:port[/db])")
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("redis URL (want redis://[user:password@]host:port[/db]): %w", err)
	}
	return opts, nil
}

// New returns a Transport for cfg, or an error when cfg.URL is empty or malformed (the error
// never quotes the URL, which may hold a password). It does not connect: Ping does.
func New(cfg Config) (*Transport, error) {
	opts, err := parseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	// Fail fast when Redis is away, so the worker falls back to PostgreSQL quickly; respect
	// the caller's deadlines.
	opts.DialTimeout = 2 * time.Second
	opts.MaxRetries = 1
	opts.ContextTimeoutEnabled = true
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if cfg.Group == "" {
		cfg.Group = DefaultGroup
	}
	if cfg.Block <= 0 {
		cfg.Block = DefaultBlock
	}
	if cfg.MaxLen <= 0 {
		cfg.MaxLen = DefaultMaxLen
	}
	return &Transport{cfg: cfg, rdb: redis.NewClient(opts), log: slog.Default(), cursor: "0-0"}, nil
}

// Name returns Name.
func (*Transport) Name() string { return Name }

// String returns Name: printing a Transport never shows its URL.
func (*Transport) String() string { return Name }

// LogValue logs a Transport as its name: logging one never shows its URL.
func (*Transport) LogValue() slog.Value { return slog.StringValue(Name) }

// Open sets the consumer name and the hold (opts.Consumer and opts.Hold are required), and
// the logger. Receive and Extend need it; Send and Ping do not. It does not connect.
func (t *Transport) Open(_ context.Context, opts transport.OpenOptions) error {
	if opts.Consumer == "" || opts.Hold <= 0 {
		return fmt.Errorf("redisstream: Open needs a consumer name and a positive hold, got %q and %s", opts.Consumer, opts.Hold)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.opened {
		return fmt.Errorf("redisstream: the transport is already open for consumer %q (a transport serves one worker)", t.consumer)
	}
	t.opened = true
	t.consumer, t.hold = opts.Consumer, opts.Hold
	if opts.Logger != nil {
		t.log = opts.Logger
	}
	return nil
}

// Close closes the connections.
func (t *Transport) Close() error { return t.rdb.Close() }

// Ping checks Redis answers and creates the stream and the consumer group if missing.
func (t *Transport) Ping(ctx context.Context) error {
	if err := t.rdb.Ping(ctx).Err(); err != nil {
		return err
	}
	return t.ensureGroup(ctx, true)
}

// ensureGroup creates the group (and the stream) unless known to exist. The group starts at
// the stream's beginning: entries added before it existed (by a dispatcher after a Redis
// restart) are delivered too.
func (t *Transport) ensureGroup(ctx context.Context, force bool) error {
	t.mu.Lock()
	ok := t.groupOK
	t.mu.Unlock()
	if ok && !force {
		return nil
	}
	err := t.rdb.XGroupCreateMkStream(ctx, t.cfg.Stream, t.cfg.Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("create consumer group %s on %s: %w", t.cfg.Group, t.cfg.Stream, err)
	}
	t.mu.Lock()
	t.groupOK = true
	t.mu.Unlock()
	return nil
}

func isNoGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }

// Send adds one entry per id, in one round trip.
func (t *Transport) Send(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.XAdd(ctx, &redis.XAddArgs{
				Stream: t.cfg.Stream, MaxLen: t.cfg.MaxLen, Approx: true,
				Values: []any{"t", transport.EncodeID(id)},
			})
		}
		return nil
	})
	if err == nil {
		return nil
	}
	var failed []int64
	for i, c := range cmds {
		if c.Err() != nil {
			failed = append(failed, ids[i])
		}
	}
	if len(failed) == 0 {
		failed = ids
	}
	return &transport.SendError{Failed: failed, Err: err}
}

// Receive takes over entries idle on other consumers past the hold (XAUTOCLAIM, every half
// hold), else reads new entries (XREADGROUP ... BLOCK).
func (t *Transport) Receive(ctx context.Context, n int) ([]transport.Message, error) {
	if t.consumer == "" {
		return nil, errors.New("redisstream: Receive before Open")
	}
	if err := t.ensureGroup(ctx, false); err != nil {
		return nil, err
	}
	if msgs, err := t.sweep(ctx, n); err != nil || len(msgs) > 0 {
		return msgs, err
	}
	res, err := t.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: t.cfg.Group, Consumer: t.consumer,
		Streams: []string{t.cfg.Stream, ">"},
		Count:   int64(n), Block: t.cfg.Block,
	}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case isNoGroup(err):
		// Redis lost the group (a restart without persistence): make it again, read next time.
		t.mu.Lock()
		t.groupOK = false
		t.mu.Unlock()
		return nil, t.ensureGroup(ctx, true)
	case err != nil:
		return nil, err
	}
	var out []transport.Message
	for _, s := range res {
		out = t.decode(ctx, out, s.Messages)
	}
	return out, nil
}

// decode turns entries into messages; a malformed entry is logged and acknowledged.
func (t *Transport) decode(ctx context.Context, out []transport.Message, entries []redis.XMessage) []transport.Message {
	for _, e := range entries {
		body, _ := e.Values["t"].(string)
		id, err := transport.DecodeID(body)
		if err != nil {
			t.log.Warn("redis stream: dropping a malformed entry", "entry", e.ID, "error", err)
			_ = t.rdb.XAck(ctx, t.cfg.Stream, t.cfg.Group, e.ID).Err()
			continue
		}
		out = append(out, transport.Message{TaskID: id, Handle: e.ID})
	}
	return out
}

// sweep, at most every half hold: takes over up to n entries pending on other consumers for
// longer than the hold (their consumer died or hangs), trims the stream below what is still
// needed, and forgets consumers that are long gone.
func (t *Transport) sweep(ctx context.Context, n int) ([]transport.Message, error) {
	t.mu.Lock()
	due := time.Since(t.lastSweep) >= t.hold/2
	if due {
		t.lastSweep = time.Now()
	}
	cursor := t.cursor
	t.mu.Unlock()
	if !due {
		return nil, nil
	}
	entries, next, err := t.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream: t.cfg.Stream, Group: t.cfg.Group, Consumer: t.consumer,
		MinIdle: t.hold, Start: cursor, Count: int64(n),
	}).Result()
	if err != nil && !isNoGroup(err) {
		return nil, fmt.Errorf("xautoclaim: %w", err)
	}
	t.mu.Lock()
	t.cursor = next
	if next == "" || next == "0-0" {
		t.cursor = "0-0"
	} else {
		t.lastSweep = time.Time{} // more to look at: again at the next Receive
	}
	t.mu.Unlock()
	if len(entries) > 0 {
		t.log.Info("redis stream: took over entries left pending by another consumer", "entries", len(entries))
	}
	t.trim(ctx)
	return t.decode(ctx, nil, entries), nil
}

// trim removes the entries every consumer is done with: those below both the oldest pending
// entry and the group's last delivered one (approximately: whole nodes only).
func (t *Transport) trim(ctx context.Context) {
	groups, err := t.rdb.XInfoGroups(ctx, t.cfg.Stream).Result()
	if err != nil {
		return
	}
	minID := ""
	for _, g := range groups {
		if g.Name == t.cfg.Group {
			minID = g.LastDeliveredID
		}
	}
	if minID == "" || minID == "0-0" {
		return
	}
	if p, err := t.rdb.XPending(ctx, t.cfg.Stream, t.cfg.Group).Result(); err == nil && p.Count > 0 && lessID(p.Lower, minID) {
		minID = p.Lower
	}
	_ = t.rdb.XTrimMinIDApprox(ctx, t.cfg.Stream, minID, 0).Err()

	consumers, err := t.rdb.XInfoConsumers(ctx, t.cfg.Stream, t.cfg.Group).Result()
	if err != nil {
		return
	}
	for _, c := range consumers {
		if c.Name != t.consumer && c.Pending == 0 && c.Idle > deadConsumerIdle {
			_ = t.rdb.XGroupDelConsumer(ctx, t.cfg.Stream, t.cfg.Group, c.Name).Err()
		}
	}
}

// lessID compares stream ids ("ms-seq").
func lessID(a, b string) bool {
	var am, as, bm, bs uint64
	_, errA := fmt.Sscanf(a, "%d-%d", &am, &as)
	_, errB := fmt.Sscanf(b, "%d-%d", &bm, &bs)
	if errA != nil || errB != nil {
		return false
	}
	return am < bm || am == bm && as < bs
}

// Ack acknowledges entries (XACK).
func (t *Transport) Ack(ctx context.Context, msgs []transport.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	return t.rdb.XAck(ctx, t.cfg.Stream, t.cfg.Group, handles(msgs)...).Err()
}

// Extend resets the idle time of entries this consumer holds (XCLAIM to itself), so that
// XAUTOCLAIM leaves them alone for another hold.
func (t *Transport) Extend(ctx context.Context, msgs []transport.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if t.consumer == "" {
		return errors.New("redisstream: Extend before Open")
	}
	return t.rdb.XClaimJustID(ctx, &redis.XClaimArgs{
		Stream: t.cfg.Stream, Group: t.cfg.Group, Consumer: t.consumer, Messages: handles(msgs),
	}).Err()
}

func handles(msgs []transport.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Handle
	}
	return out
}
