package admin

import (
	"context"
	"fmt"
	"time"
)

// ReplicaLag is how far a read replica is behind its primary, as ReadReplicaLag measures it.
type ReplicaLag struct {
	// Standby: the read database is in recovery (a streaming standby). When false, the other
	// fields are zero: the database is as current as a primary.
	Standby bool `json:"standby"`
	// BehindBytes is the WAL the primary has flushed (what a standby can receive) that the
	// standby has not replayed yet.
	BehindBytes int64 `json:"behind_bytes"`
	// LastReplay is how long ago the standby replayed its last transaction; nil before it has
	// replayed any. When BehindBytes is 0 it only says how long the primary has been quiet.
	LastReplay *time.Duration `json:"last_replay,omitempty"`
}

// ReadReplicaLag measures how far replica is behind primary: the replica's replay position and
// the time of its last replayed transaction, then the primary's WAL position.
func ReadReplicaLag(ctx context.Context, primary, replica DB) (ReplicaLag, error) {
	var l ReplicaLag
	var replayed *string
	var ago *float64
	if err := replica.QueryRow(ctx, `select pg_is_in_recovery(), pg_last_wal_replay_lsn()::text,
		extract(epoch from clock_timestamp() - pg_last_xact_replay_timestamp())::float8`).Scan(&l.Standby, &replayed, &ago); err != nil {
		return l, fmt.Errorf("read the replica's replay position: %w", err)
	}
	if !l.Standby || replayed == nil {
		return ReplicaLag{}, nil
	}
	if ago != nil {
		d := time.Duration(*ago * float64(time.Second))
		l.LastReplay = &d
	}
	if err := primary.QueryRow(ctx, `select greatest(pg_wal_lsn_diff(pg_current_wal_flush_lsn(), $1::pg_lsn), 0)::bigint`, *replayed).
		Scan(&l.BehindBytes); err != nil {
		return l, fmt.Errorf("read the primary's WAL position: %w", err)
	}
	return l, nil
}

// String says it in words: "caught up with the primary", "1.2 MB of WAL behind the primary, last
// transaction replayed 3s ago", "not a standby".
func (l ReplicaLag) String() string {
	switch {
	case !l.Standby:
		return "not a standby: as current as the primary"
	case l.BehindBytes == 0:
		return "caught up with the primary"
	}
	s := walBytes(l.BehindBytes) + " of WAL behind the primary"
	if l.LastReplay != nil {
		s += ", last transaction replayed " + l.LastReplay.Round(100*time.Millisecond).String() + " ago"
	}
	return s
}

// walBytes shows a WAL distance: 512 B, 12.3 kB, 4.5 MB, 1.2 GB.
func walBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1_000_000_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	default:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	}
}
