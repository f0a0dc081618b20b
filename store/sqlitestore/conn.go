package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"

	sqlite3 "github.com/mattn/go-sqlite3"
	vigil "github.com/vigilhq/vigil"
)

// Statements run on the driver connection itself (sql.Conn.Raw), not
// through database/sql's statement layer: on the writer's mix of short
// statements that layer cost more than SQLite did (argument conversion,
// reflection in Scan, a goroutine per statement when the context can be
// cancelled). Each statement is prepared once per driver connection and
// kept for the connection's life.
//
// Statements never watch a context. Inside a write transaction that is a
// rule, not a shortcut: SQLite rolls back the whole transaction when an
// INSERT, UPDATE or DELETE in it is interrupted, which would take the other
// writes of a group commit with it and leave later statements running
// outside any transaction. Reads are bounded (a delta reads at most a few
// hundred rows), so they check the context before they start.

// connState is what the store keeps for one driver connection.
type connState struct {
	c     *sqlite3.SQLiteConn
	stmts map[string]*prepared
	args  []driver.NamedValue
}

type prepared struct {
	st   *sqlite3.SQLiteStmt
	ncol int // result columns, known after the first query
}

// state returns the store's state for a driver connection, creating it on
// first use. Only the goroutine holding the connection uses the state.
func (s *Store) state(dc any) (*connState, error) {
	c, ok := dc.(*sqlite3.SQLiteConn)
	if !ok {
		return nil, fmt.Errorf("sqlitestore: unexpected driver connection %T", dc)
	}
	if st, ok := s.conns.Load(c); ok {
		return st.(*connState), nil
	}
	st := &connState{c: c, stmts: map[string]*prepared{}}
	s.conns.Store(c, st)
	return st, nil
}

func (cs *connState) prepare(q string) (*prepared, error) {
	if p, ok := cs.stmts[q]; ok {
		return p, nil
	}
	st, err := cs.c.Prepare(q)
	if err != nil {
		return nil, err
	}
	p := &prepared{st: st.(*sqlite3.SQLiteStmt), ncol: -1}
	cs.stmts[q] = p
	return p, nil
}

// bind converts args to the driver's argument list, reusing one buffer:
// the driver copies arguments when it binds them.
func (cs *connState) bind(args []any) []driver.NamedValue {
	cs.args = cs.args[:0]
	for i, a := range args {
		switch v := a.(type) {
		case int:
			a = int64(v)
		case []byte:
			if v == nil {
				a = nil
			}
		}
		cs.args = append(cs.args, driver.NamedValue{Ordinal: i + 1, Value: a})
	}
	return cs.args
}

// close finalizes the connection's statements.
func (cs *connState) close() {
	for _, p := range cs.stmts {
		p.st.Close()
	}
	cs.stmts = nil
}

// conn is a pool connection checked out for one write transaction or one
// read.
type conn struct {
	s  *Store
	sc *sql.Conn
	// tx is the write transaction the connection runs, if any.
	tx *Tx
}

// ErrTxEnded is returned by every statement the store runs in a write
// transaction that SQLite already ended on its own, as it does when a
// statement in it is interrupted or fails in some ways: run outside a
// transaction, the statement would write the file at once, where the
// store's memory could not follow.
var ErrTxEnded = errors.New("sqlitestore: SQLite already ended the write transaction; nothing more runs in it")

// errClosed is returned by statements of a write transaction left open
// past Close that start after it: the store writes nothing more.
var errClosed = errors.New("sqlitestore: store closed")

// errWriteRunning is part of Close's error when a write transaction still
// held the writer connection once Close stopped waiting for it.
var errWriteRunning = errors.New("sqlitestore: a write transaction was still running at Close; " +
	"its connection, the file and the file's lock are released when it ends")

// failure marks an error of SQLite, of its connections or of a store
// already closed as the store's: vigil.ErrStoreFailed, keeping its text.
type failure struct{ err error }

func (e *failure) Error() string   { return e.err.Error() }
func (e *failure) Unwrap() []error { return []error{e.err, vigil.ErrStoreFailed} }

// failed marks err as the store's failure. Every statement's error passes
// here (withStmt), as do those of taking a connection and of the reads
// that go around the prepared statements.
func failed(err error) error {
	if err == nil || errors.Is(err, vigil.ErrStoreFailed) {
		return err
	}
	return &failure{err}
}

// withStmt runs f with the connection's prepared statement for q, holding
// the driver connection.
func (c conn) withStmt(q string, f func(cs *connState, p *prepared) error) error {
	return failed(c.sc.Raw(func(dc any) error {
		cs, err := c.s.state(dc)
		if err != nil {
			return err
		}
		if c.tx != nil {
			if c.s.shut.Load() {
				return errClosed
			}
			if cs.c.AutoCommit() {
				return ErrTxEnded
			}
		}
		p, err := cs.prepare(q)
		if err != nil {
			return err
		}
		if c.tx != nil {
			testHookWriteStatement()
		}
		return f(cs, p)
	}))
}

// testHookWriteStatement runs when a statement of a write transaction is
// about to run, its statement prepared: tests hold it there.
var testHookWriteStatement = func() {}

// exec runs a statement and returns how many rows it changed.
func (c conn) exec(q string, args ...any) (int64, error) {
	n, _, err := c.execID(q, args...)
	return n, err
}

// execID runs a statement and returns how many rows it changed and the
// rowid of the last row it inserted.
func (c conn) execID(q string, args ...any) (n, id int64, err error) {
	err = c.withStmt(q, func(cs *connState, p *prepared) error {
		res, err := p.st.ExecContext(context.Background(), cs.bind(args))
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	return n, id, err
}

// query runs a statement and calls row for each result row. The values are
// valid only during the call, and row must not use the connection: it runs
// while the driver connection is held.
func (c conn) query(q string, args []any, row func(r rowValues) error) error {
	return c.withStmt(q, func(cs *connState, p *prepared) error {
		rows, err := p.st.QueryContext(context.Background(), cs.bind(args))
		if err != nil {
			return err
		}
		defer rows.Close()
		if p.ncol < 0 {
			p.ncol = len(rows.Columns())
		}
		dest := make([]driver.Value, p.ncol)
		for {
			if err := rows.Next(dest); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			if err := row(rowValues(dest)); err != nil {
				return err
			}
		}
	})
}

// queryRow runs a statement expected to return at most one row and reports
// whether it did.
func (c conn) queryRow(q string, args []any, row func(r rowValues) error) (bool, error) {
	found := false
	err := c.query(q, args, func(r rowValues) error {
		if found {
			return nil
		}
		found = true
		return row(r)
	})
	return found, err
}

// inTx reports whether the connection is inside a transaction.
func (c conn) inTx() bool {
	in := false
	c.sc.Raw(func(dc any) error {
		if sc, ok := dc.(*sqlite3.SQLiteConn); ok {
			in = !sc.AutoCommit()
		}
		return nil
	})
	return in
}

// rowValues is one result row as the driver returns it.
type rowValues []driver.Value

// int reads an INTEGER column; NULL reads as 0.
func (r rowValues) int(i int) int64 {
	switch v := r[i].(type) {
	case int64:
		return v
	case bool:
		if v {
			return 1
		}
	case float64:
		return int64(v)
	}
	return 0
}

// isNull reports whether column i is NULL.
func (r rowValues) isNull(i int) bool { return r[i] == nil }

// str reads a TEXT column; NULL reads as "".
func (r rowValues) str(i int) string {
	switch v := r[i].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

// bytes reads a TEXT or BLOB column as bytes; NULL reads as nil.
func (r rowValues) bytes(i int) []byte {
	switch v := r[i].(type) {
	case string:
		return []byte(v)
	case []byte:
		return append([]byte(nil), v...)
	}
	return nil
}
