// Package citustest gives the tests of one test binary a local Citus cluster
// (a coordinator and two workers, from scripts/citus-cluster.sh), started on
// first use and stopped when the binary ends, and lets a test kill, restart
// and add workers. Where Citus cannot run, tests skip with a loud reason.
//
//	func TestMain(m *testing.M) { citustest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		c := citustest.Start(t) // skips when Citus is not available
//		pool := connect(t, c.Coordinator.URL)
//		...
//	}
//
// With CITUS_BASEDIR set, the cluster in that directory is used (and started
// there if needed) and left running at the end: one cluster for many packages.
package citustest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Timeouts of the script's commands; a missing Citus is built on first start.
const (
	startTimeout = 15 * time.Minute
	nodeTimeout  = 3 * time.Minute
)

// exitUnavailable is the script's exit code for "Citus cannot run here".
const exitUnavailable = 3

// Node is one PostgreSQL instance of the cluster.
type Node struct {
	Name string // "coordinator", "worker1", "worker2", ...
	Port int
	URL  string // postgres://postgres@127.0.0.1:PORT/idemctl?sslmode=disable
}

// Cluster is a running local Citus cluster. Its methods are safe for
// concurrent use, so a test can kill a worker while its load runs.
type Cluster struct {
	BaseDir     string
	Coordinator Node
	StartTime   time.Duration // how long `up` took

	script string
	owned  bool // started by this binary, so stopped by Main

	mu      sync.Mutex
	workers []Node
}

// UnavailableError says why no Citus cluster can run on this machine.
type UnavailableError struct {
	Reason string
}

func (e *UnavailableError) Error() string {
	return "skipped: Citus not available (" + e.Reason + ")"
}

var (
	mainRunning bool
	state       struct {
		sync.Mutex
		started bool
		cluster *Cluster
		err     error
	}
)

// Main runs the tests of the binary, then stops the cluster if one was
// started. Call it from TestMain. An interrupt stops the cluster too.
func Main(m *testing.M) {
	mainRunning = true
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		_ = stop()
		os.Exit(130)
	}()
	code := m.Run()
	signal.Stop(signals)
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "citustest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Start returns the binary's cluster, starting it on first use. It skips the
// test with the reason when Citus is not available, and fails it on any other
// error.
func Start(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := Get()
	var unavailable *UnavailableError
	if errors.As(err, &unavailable) {
		tb.Skip(unavailable.Error())
	}
	if err != nil {
		tb.Fatalf("citustest: %v", err)
	}
	return c
}

// Get is Start for callers without a testing.TB: it returns an
// *UnavailableError when Citus cannot run here.
func Get() (*Cluster, error) {
	if !mainRunning {
		return nil, errors.New("call citustest.Main(m) from TestMain, so that the cluster is stopped at the end")
	}
	state.Lock()
	defer state.Unlock()
	if !state.started {
		state.started = true
		state.cluster, state.err = up()
	}
	return state.cluster, state.err
}

func stop() error {
	state.Lock()
	defer state.Unlock()
	c := state.cluster
	state.cluster = nil
	if c == nil || !c.owned {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	_, err := c.run(ctx, "down", c.BaseDir)
	return err
}

func up() (*Cluster, error) {
	script, err := findScript()
	if err != nil {
		return nil, err
	}
	c := &Cluster{script: script}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c.BaseDir = os.Getenv("CITUS_BASEDIR")
	if c.BaseDir == "" {
		// Clusters of test binaries that died without stopping theirs.
		_, _ = c.run(ctx, "reap")
		if c.BaseDir, err = makeBaseDir(); err != nil {
			return nil, err
		}
		c.owned = true
	}
	began := time.Now()
	env, err := c.run(ctx, "up", c.BaseDir)
	if err != nil {
		if c.owned { // stop whatever nodes did start
			_, _ = c.run(ctx, "down", c.BaseDir)
			_ = os.RemoveAll(c.BaseDir)
		}
		return nil, err
	}
	c.StartTime = time.Since(began)
	return c, c.load(env)
}

// makeBaseDir makes an empty directory for the cluster, short enough for the
// unix socket paths inside it (at most 107 bytes on Linux).
func makeBaseDir() (string, error) {
	parent := os.TempDir()
	if len(parent) > 40 {
		parent = "/tmp"
	}
	dir, err := os.MkdirTemp(parent, "idemctl-citus-")
	if err != nil {
		return "", fmt.Errorf("make the cluster's directory: %w", err)
	}
	return dir, nil
}

// findScript looks for scripts/citus-cluster.sh in the module root above the
// working directory (a test runs in its package's directory).
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "scripts", "citus-cluster.sh"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: cannot find scripts/citus-cluster.sh")
		}
		dir = parent
	}
}

// Workers returns the cluster's workers, in the order they were added.
func (c *Cluster) Workers() []Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Node(nil), c.workers...)
}

// KillWorker sends SIGKILL to worker i's postmaster and to every one of its
// backends at once (the postmaster stopped first so it forks no new one), as
// a crashed machine would: in-flight transactions there are cut off, prepared
// ones survive for recovery. i indexes Workers().
func (c *Cluster) KillWorker(i int) error {
	return c.workerCommand("kill-worker", i)
}

// RestartWorker stops worker i (fast shutdown) if it runs, and starts it again,
// with crash recovery after KillWorker. It returns once the worker accepts
// connections. i indexes Workers().
func (c *Cluster) RestartWorker(i int) error {
	if err := c.workerCommand("stop-worker", i); err != nil {
		return err
	}
	return c.workerCommand("start-worker", i)
}

func (c *Cluster) workerCommand(command string, i int) error {
	if n := len(c.Workers()); i < 0 || i >= n {
		return fmt.Errorf("%s: no worker %d (the cluster has %d)", command, i, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	_, err := c.run(ctx, command, strconv.Itoa(i+1), c.BaseDir)
	return err
}

// AddWorker starts one more worker and adds it to the cluster with
// citus_add_node; it holds no shards until a rebalance moves some there.
func (c *Cluster) AddWorker() (Node, error) {
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	env, err := c.run(ctx, "add-worker", c.BaseDir)
	if err != nil {
		return Node{}, err
	}
	if err := c.load(env); err != nil {
		return Node{}, err
	}
	workers := c.Workers()
	return workers[len(workers)-1], nil
}

// load sets the nodes from the script's KEY=VALUE output.
func (c *Cluster) load(env map[string]string) error {
	coordinator, err := node(env, "coordinator", "CITUS_COORDINATOR")
	if err != nil {
		return err
	}
	count, err := strconv.Atoi(env["CITUS_WORKERS"])
	if err != nil {
		return fmt.Errorf("script output: CITUS_WORKERS=%q", env["CITUS_WORKERS"])
	}
	workers := make([]Node, count)
	for i := range workers {
		n := strconv.Itoa(i + 1)
		if workers[i], err = node(env, "worker"+n, "CITUS_WORKER_"+n); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Coordinator, c.workers = coordinator, workers
	return nil
}

func node(env map[string]string, name, prefix string) (Node, error) {
	port, err := strconv.Atoi(env[prefix+"_PORT"])
	if err != nil || env[prefix+"_URL"] == "" {
		return Node{}, fmt.Errorf("script output has no port and URL for %s", name)
	}
	return Node{Name: name, Port: port, URL: env[prefix+"_URL"]}, nil
}

// run runs the script and parses the KEY=VALUE lines it prints.
func (c *Cluster) run(ctx context.Context, args ...string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{c.script}, args...)...)
	cmd.Env = append(os.Environ(), "CITUS_OWNER_PID="+strconv.Itoa(os.Getpid()))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == exitUnavailable {
		return nil, &UnavailableError{Reason: unavailableReason(stderr.String())}
	}
	if err != nil {
		return nil, fmt.Errorf("citus-cluster.sh %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return parseEnv(stdout.String()), nil
}

func unavailableReason(stderr string) string {
	const mark = "NOT AVAILABLE: "
	for _, line := range strings.Split(stderr, "\n") {
		if _, reason, ok := strings.Cut(line, mark); ok {
			return reason
		}
	}
	return strings.TrimSpace(stderr)
}

func parseEnv(out string) map[string]string {
	env := map[string]string{}
	scanner := bufio.NewScanner(strings.NewReader(out))
	for scanner.Scan() {
		if key, value, ok := strings.Cut(scanner.Text(), "="); ok {
			env[key] = value
		}
	}
	return env
}
