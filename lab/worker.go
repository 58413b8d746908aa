package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/internal/db"
)

// WorkerEnv, set to "1", tells a binary that embeds the lab (a test binary) to
// run Worker instead of its main; idemctl itself uses `idemctl lab worker`.
const WorkerEnv = "IDEMCTL_LAB_WORKER"

// Worker session settings. client_connection_check_interval makes a backend
// notice a killed client while it waits on a lock, so that the server rolls
// the transaction back there and then, as it would for a crashed service.
const (
	workerAppPrefix       = "idemctl-lab-worker-"
	workerLockTimeout     = "10s"
	workerStatementTimout = "30s"
	workerIdleInTxTimeout = "60s"
	workerConnCheck       = "50ms"
)

// assignment is what the parent sends a worker on its stdin, as one JSON line.
// The DSN travels here rather than in argv, where ps would show it.
type assignment struct {
	DSN      string   `json:"dsn"`
	RunID    string   `json:"run"`
	Design   string   `json:"design"`
	Schema   string   `json:"schema"`
	KillAt   string   `json:"kill_at"`
	Delivery delivery `json:"delivery"`
	// Redis is the unix socket of the design's own Redis server ("" for none).
	Redis string `json:"redis,omitempty"`
}

// errParentGone ends a worker whose parent closed its stdin instead of killing it.
var errParentGone = errors.New("lab parent went away")

// Worker is the child side of a crash trial: it reads its assignment from in,
// connects, runs one delivery step by step and writes to out
//
//	ready <backend pid>
//	step <name>           (one line per step reached)
//	reply <json>          (only if it was not killed first)
//
// At its kill step it stops and waits for the SIGKILL (at during_effect it goes
// on into the effect, where a lock held by the parent stops it server-side; at
// commit_sent it sends COMMIT and never reads the reply).
func Worker(ctx context.Context, in io.Reader, out io.Writer) error {
	br := bufio.NewReader(in)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("read assignment: %w", err)
	}
	var a assignment
	if err := json.Unmarshal(line, &a); err != nil {
		return fmt.Errorf("parse assignment: %w", err)
	}
	d, err := designByName(a.Design)
	if err != nil {
		return err
	}
	q, err := designStatements(d, a.Schema)
	if err != nil {
		return err
	}
	conn, err := connectWorker(ctx, a.DSN, a.RunID)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := fmt.Fprintf(out, "ready %d\n", conn.PgConn().PID()); err != nil {
		return err
	}
	s := &session{conn: conn, q: q, killAt: a.KillAt, effectStmt: d.effect}
	if a.Redis != "" {
		cmds, err := loadRedisCommands(d.redisFile)
		if err != nil {
			return err
		}
		s.redis = newRedisClient(a.Redis, cmds)
		defer s.redis.close()
	}
	s.at = func(ctx context.Context, _ *session, step string) error {
		if _, err := fmt.Fprintf(out, "step %s\n", step); err != nil {
			return err
		}
		if step != a.KillAt || step == StepDuringEffect {
			return nil
		}
		// Wait for the kill. EOF means the parent died: stop.
		_, _ = io.Copy(io.Discard, br)
		return errParentGone
	}
	r, err := d.run(ctx, s, a.Delivery)
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "reply %s\n", b)
	return err
}

func connectWorker(ctx context.Context, dsn, runID string) (*pgx.Conn, error) {
	cfg, err := db.Config(dsn, db.Options{})
	if err != nil {
		return nil, err
	}
	rp := cfg.ConnConfig.RuntimeParams
	rp["application_name"] = workerAppPrefix + runID
	rp["lock_timeout"] = workerLockTimeout
	rp["statement_timeout"] = workerStatementTimout
	rp["idle_in_transaction_session_timeout"] = workerIdleInTxTimeout
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, fmt.Errorf("worker connect to %s: %s", db.Describe(dsn), db.Scrub(dsn, err.Error()))
	}
	// Not a startup parameter: a server without it (PostgreSQL < 14) still works,
	// its backends just notice a dead client later.
	if _, err := conn.Exec(ctx, "SET client_connection_check_interval = '"+workerConnCheck+"'"); err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42704" {
			conn.Close(context.Background())
			return nil, err
		}
	}
	return conn, nil
}

// designStatements are a design's statements plus the shared ones, for schema.
func designStatements(d design, schema string) (statements, error) {
	common, err := loadStatements("lab.sql", schema)
	if err != nil {
		return nil, err
	}
	if d.file == "" {
		return common, nil
	}
	own, err := loadStatements(d.file, schema)
	if err != nil {
		return nil, err
	}
	for k, v := range own {
		if _, dup := common[k]; dup {
			return nil, fmt.Errorf("%s: statement %q shadows lab.sql", d.file, k)
		}
		common[k] = v
	}
	return common, nil
}

// WorkerCommand is how the parent starts a worker process.
type WorkerCommand struct {
	Path string
	Args []string
	// Env is added to the parent's environment.
	Env []string
}

// DefaultWorkerCommand re-executes the running binary as `idemctl lab worker`.
func DefaultWorkerCommand() (WorkerCommand, error) {
	exe, err := os.Executable()
	if err != nil {
		return WorkerCommand{}, fmt.Errorf("find the idemctl binary for lab workers: %w", err)
	}
	return WorkerCommand{Path: exe, Args: []string{"lab", "worker"}}, nil
}

// killRecord is one kill of a crash trial; the report keeps their summary.
type killRecord struct {
	Trial   int           `json:"trial"`
	Step    string        `json:"step"`
	Elapsed time.Duration `json:"elapsed"`
	// Confirmed is true when the server state the step promises was seen before
	// the kill (a lock wait for during_effect, an idle session for commit_sent).
	Confirmed  bool   `json:"confirmed"`
	BackendPID uint32 `json:"-"`
}

// crashResult is what the parent learned from one crash trial.
type crashResult struct {
	kill  *killRecord // nil when the worker finished before its kill step
	reply *Reply      // the worker's reply when it was not killed
}

// crash runs the first attempt of one trial in a worker process and SIGKILLs it
// at the trial's kill step.
func (r *runner) crash(ctx context.Context, ds *designState, t Trial, del delivery) (crashResult, error) {
	killAt := ds.d.killStep(t)
	if killAt == StepDuringEffect {
		// Hold the trial's second account so the worker's effect blocks on it,
		// after the marker or inbox row is written.
		release, err := r.holdAccount(ctx, ds, t)
		if err != nil {
			return crashResult{}, err
		}
		defer release()
	}
	payload, err := r.assignment(ds, killAt, del)
	if err != nil {
		return crashResult{}, err
	}
	cmd := r.workerCommand()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return crashResult{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return crashResult{}, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return crashResult{}, fmt.Errorf("start lab worker %s: %w", r.worker.Path, err)
	}
	var killOnce sync.Once
	kill := func() { killOnce.Do(func() { killPID(cmd.Process.Pid) }) }
	stopWatch := context.AfterFunc(ctx, kill)
	defer stopWatch()
	defer func() {
		kill() // never leave a worker behind, whatever happened
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	if _, err := stdin.Write(payload); err != nil {
		return crashResult{}, fmt.Errorf("send assignment: %w", err)
	}

	var res crashResult
	var backend uint32
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		verb, arg, _ := strings.Cut(sc.Text(), " ")
		switch verb {
		case "ready":
			pid, err := strconv.ParseUint(arg, 10, 32)
			if err != nil {
				return crashResult{}, fmt.Errorf("worker said %q", sc.Text())
			}
			backend = uint32(pid)
		case "step":
			if arg != killAt {
				continue
			}
			res.kill = r.killAtStep(ctx, killAt, backend, kill)
			res.kill.Trial, res.kill.Elapsed = t.Index, time.Since(start)
			return res, nil
		case "reply":
			var rep Reply
			if err := json.Unmarshal([]byte(arg), &rep); err != nil {
				return crashResult{}, fmt.Errorf("worker reply %q: %w", arg, err)
			}
			res.reply = &rep
		}
	}
	if ctx.Err() != nil {
		return crashResult{}, ctx.Err()
	}
	if err := cmd.Wait(); err != nil {
		return crashResult{}, fmt.Errorf("lab worker (%s, trial %d, kill at %s) failed: %v: %s",
			ds.d.Name, t.Index, killAt, err, strings.TrimSpace(db.Scrub(r.opts.DSN, stderr.String())))
	}
	if res.reply == nil {
		return crashResult{}, fmt.Errorf("lab worker (%s, trial %d) ended without reaching %s or replying", ds.d.Name, t.Index, killAt)
	}
	return res, nil
}

// killAtStep kills a worker that reached its kill step, once the server
// shows the state the step promises (a lock wait, an idle session).
func (r *runner) killAtStep(ctx context.Context, killAt string, backend uint32, kill func()) *killRecord {
	confirmed := true
	switch killAt {
	case StepDuringEffect:
		confirmed = r.waitBackend(ctx, backend, "wait_event_type = 'Lock'")
	case StepCommitSent:
		confirmed = r.waitBackend(ctx, backend, "state = 'idle'")
	}
	kill()
	if killAt == StepDuringEffect {
		// Let the server roll the killed transaction back before the
		// account lock goes, or the effect could finish after all.
		r.waitGone(ctx, []uint32{backend}, 5*time.Second)
	}
	return &killRecord{Step: killAt, Confirmed: confirmed, BackendPID: backend}
}

// assignment is the JSON line that tells a worker what to run and where to die.
func (r *runner) assignment(ds *designState, killAt string, del delivery) ([]byte, error) {
	a := assignment{DSN: r.opts.DSN, RunID: r.runID, Design: ds.d.Name, Schema: ds.schema, KillAt: killAt, Delivery: del}
	if ds.redis != nil {
		a.Redis = ds.redis.sock
	}
	b, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("worker assignment: %w", err)
	}
	return append(b, '\n'), nil
}

// workerCommand is a worker process, not started yet.
func (r *runner) workerCommand() *exec.Cmd {
	cmd := exec.Command(r.worker.Path, r.worker.Args...)
	cmd.Env = append(os.Environ(), r.worker.Env...)
	// Own process group: a Ctrl-C on the terminal reaches the parent only, which
	// then kills its workers itself. A worker whose parent dies sees EOF on
	// stdin at its kill step and exits (no Pdeathsig: it follows the forking
	// thread, not the process).
	ownProcessGroup(cmd)
	return cmd
}

// holdAccount locks the trial's "to" account in a transaction of the parent's
// and returns the function that rolls it back.
func (r *runner) holdAccount(ctx context.Context, ds *designState, t Trial) (func(), error) {
	c, err := r.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		c.Release()
		return nil, err
	}
	if _, err := tx.Exec(ctx, ds.q["lock_account"], t.Tenant, t.To); err != nil {
		_ = tx.Rollback(context.Background())
		c.Release()
		return nil, fmt.Errorf("lock account %s/%s: %w", t.Tenant, t.To, err)
	}
	return func() {
		_ = tx.Rollback(context.Background())
		c.Release()
	}, nil
}

// waitBackend polls pg_stat_activity until the backend matches cond, for at
// most 5 s. It reports whether it did.
func (r *runner) waitBackend(ctx context.Context, pid uint32, cond string) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var ok bool
		err := r.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND "+cond+")", int64(pid)).Scan(&ok)
		if err == nil && ok {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return false
}

// waitGone polls until none of the backends is left, for at most timeout, and
// reports whether they all went.
func (r *runner) waitGone(ctx context.Context, pids []uint32, timeout time.Duration) bool {
	return waitGone(ctx, r.pool, pids, timeout)
}

func waitGone(ctx context.Context, pool *pgxpool.Pool, pids []uint32, timeout time.Duration) bool {
	if len(pids) == 0 {
		return true
	}
	ids := make([]int64, len(pids))
	for i, p := range pids {
		ids[i] = int64(p)
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)", ids).Scan(&n); err == nil && n == 0 {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}
