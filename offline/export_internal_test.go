package offline

import (
	"context"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/record"
)

// ScanCharges reads the log of the store in dir as Scan does, with a
// budget of its own, and returns what the budget was charged and the
// bytes the compressed parts of the records decompressed to.
func ScanCharges(dir string) (charged, decompressed int64, err error) {
	b := frame.NewBudget()
	s, err := openReadOnly(dir, nil, b, nil, true)
	if err != nil {
		return 0, 0, err
	}
	defer s.close()
	err = s.scan(context.Background(), func(lr *LogRecord, r *record.Record) error {
		switch r.Kind {
		case record.KindAtom:
			decompressed += int64(len(s.buf))
		case record.KindIntent, record.KindCert:
			decompressed += int64(len(r.Plain))
		}
		return nil
	})
	_, charged = b.Used()
	return charged, decompressed, err
}
