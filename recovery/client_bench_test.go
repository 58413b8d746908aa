package recovery_test

import (
	"bytes"
	"testing"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/recovery"
)

// BenchmarkClientLine: the client's work per input line of the dry-run
// benchmark, without a database: reading the line (parse), and preparing it
// (canonical bytes and hash).
func BenchmarkClientLine(b *testing.B) {
	input, _ := benchInput(benchIdentities, 1, benchRows)
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		src := recovery.NDJSON(bytes.NewReader(input), idem.DefaultMaxPayloadBytes+recovery.LineSlack)
		rw := src.(interface{ Rewind() error })
		for range b.N {
			if _, err := src.Next(); err != nil {
				_ = rw.Rewind()
			}
		}
	})
	b.Run("parse+prepare", func(b *testing.B) {
		b.ReportAllocs()
		src := recovery.NDJSON(bytes.NewReader(input), idem.DefaultMaxPayloadBytes+recovery.LineSlack)
		rw := src.(interface{ Rewind() error })
		for range b.N {
			it, err := src.Next()
			if err != nil {
				_ = rw.Rewind()
				continue
			}
			if err := recovery.Check(it.Request, idem.PayloadLimits{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
