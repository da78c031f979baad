// Package redisstream is the Redis Streams transport: task ids are entries of one stream, read
// by workers through one consumer group (XREADGROUP with BLOCK, in batches), acknowledged with
// XACK once the task's outcome is committed. Entries left pending by a dead consumer are taken
// over with XAUTOCLAIM once idle longer than the hold; the stream is trimmed (MINID, below the
// oldest entry still pending or undelivered, and a MAXLEN ~ bound at XADD).
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

	"github.com/taskorch/taskorch/internal/transport"
)

// Defaults of Config.
const (
	DefaultStream = "taskorch:tasks"
	DefaultGroup  = "taskorch"
	DefaultBlock  = time.Second
	DefaultMaxLen = 1_000_000
	DefaultHold   = 5 * time.Minute
)

// deadConsumerIdle: a consumer with nothing pending, silent this long, is removed from the group.
const deadConsumerIdle = time.Hour

// Config configures a Transport.
type Config struct {
	// URL is the Redis URL: redis://[user:password@]host:port[/db], or rediss:// for TLS.
	URL string
	// Stream is the stream's key. Defaults to DefaultStream.
	Stream string
	// Group is the consumer group. Defaults to DefaultGroup.
	Group string
	// Consumer names this worker in the group (the worker id). Required to receive.
	Consumer string
	// Hold is how long an entry may stay pending on a consumer that does not acknowledge or
	// extend it before another consumer takes it over (XAUTOCLAIM). Defaults to DefaultHold.
	Hold time.Duration
	// Block bounds one XREADGROUP wait. Defaults to DefaultBlock.
	Block time.Duration
	// MaxLen bounds the stream at XADD (MAXLEN ~): a safety net above what trimming keeps.
	// Defaults to DefaultMaxLen.
	MaxLen int64
	// Logger receives what the transport does on its own (taking over entries, trimming).
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// Transport is the Redis Streams transport. Create it with New.
type Transport struct {
	cfg Config
	rdb *redis.Client
	log *slog.Logger

	mu        sync.Mutex
	groupOK   bool      // the consumer group is known to exist
	lastSweep time.Time // last XAUTOCLAIM / trim pass
	cursor    string    // XAUTOCLAIM's cursor over the pending entries
}

var _ transport.Transport = (*Transport)(nil)

// ParseURL checks a Redis URL. Its errors never quote the URL, which may hold a password.
func ParseURL(raw string) (*redis.Options, error) {
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

// New returns a Transport for cfg. It does not connect: the first command does.
func New(cfg Config) (*Transport, error) {
	opts, err := ParseURL(cfg.URL)
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
	if cfg.Hold <= 0 {
		cfg.Hold = DefaultHold
	}
	if cfg.Block <= 0 {
		cfg.Block = DefaultBlock
	}
	if cfg.MaxLen <= 0 {
		cfg.MaxLen = DefaultMaxLen
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Transport{cfg: cfg, rdb: redis.NewClient(opts), log: cfg.Logger, cursor: "0-0"}, nil
}

// Name returns transport.Redis.
func (*Transport) Name() string { return transport.Redis }

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
	if t.cfg.Consumer == "" {
		return nil, errors.New("redisstream: Receive needs Config.Consumer")
	}
	if err := t.ensureGroup(ctx, false); err != nil {
		return nil, err
	}
	if msgs, err := t.sweep(ctx, n); err != nil || len(msgs) > 0 {
		return msgs, err
	}
	res, err := t.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: t.cfg.Group, Consumer: t.cfg.Consumer,
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
	due := time.Since(t.lastSweep) >= t.cfg.Hold/2
	if due {
		t.lastSweep = time.Now()
	}
	cursor := t.cursor
	t.mu.Unlock()
	if !due {
		return nil, nil
	}
	entries, next, err := t.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream: t.cfg.Stream, Group: t.cfg.Group, Consumer: t.cfg.Consumer,
		MinIdle: t.cfg.Hold, Start: cursor, Count: int64(n),
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
		if c.Name != t.cfg.Consumer && c.Pending == 0 && c.Idle > deadConsumerIdle {
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
	return t.rdb.XClaimJustID(ctx, &redis.XClaimArgs{
		Stream: t.cfg.Stream, Group: t.cfg.Group, Consumer: t.cfg.Consumer, Messages: handles(msgs),
	}).Err()
}

func handles(msgs []transport.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Handle
	}
	return out
}
