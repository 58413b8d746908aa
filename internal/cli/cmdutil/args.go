package cmdutil

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/idem"
)

// MaxArgs is cobra.MaximumNArgs with a usage exit code.
func MaxArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return UsageErr("%s takes at most %d argument(s), got %d", cmd.CommandPath(), n, len(args))
		}
		return nil
	}
}

// ParseID reads the one positional argument as the positive id of what.
func ParseID(args []string, what string) (int64, error) {
	if len(args) != 1 {
		return 0, UsageErr("%s id is required", what)
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id < 1 {
		return 0, UsageErr("%s id %q: a positive number", what, args[0])
	}
	return id, nil
}

// ParseSinceFlag reads a time (RFC 3339, or a date) or a duration back from now.
func ParseSinceFlag(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("duration %q must be positive", s)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither a time (2026-11-30, 2026-11-30T08:00:00Z) nor a duration (24h)", s)
}

// ReadLimited reads at most max bytes and refuses more without reading it all.
func ReadLimited(r io.Reader, max int) ([]byte, error) {
	if max <= 0 {
		max = idem.DefaultMaxPayloadBytes
	}
	raw, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("read payload: %w", err)
	}
	if len(raw) > max {
		return nil, fmt.Errorf("%w: more than %d bytes; raise --max-bytes if this is expected", idem.ErrPayloadTooLarge, max)
	}
	return raw, nil
}
