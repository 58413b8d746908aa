package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoRedisServer is returned when a design that needs a real Redis server
// is selected and no redis-server binary can be found.
var ErrNoRedisServer = errors.New("redis-server not found")

// findRedisServer resolves the redis-server binary ("" means the one in PATH).
func findRedisServer(bin string) (string, error) {
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("%w (%s): design redis_inbox runs a Redis server of its own and cannot be shown without one; "+
			"install it (Debian: apt-get install redis-server), name it with --redis-server, or leave redis_inbox out of --designs",
			ErrNoRedisServer, bin)
	}
	return path, nil
}

// redisServer is a Redis server the lab runs for one design: its own data
// directory, reached on a unix socket in it (no TCP port, so it can never be
// mistaken for a shared server). It persists by RDB snapshots only, when the
// lab says SAVE: what was written since is lost when it is killed, as on any
// Redis whose append-only file is off or not yet synced.
type redisServer struct {
	bin, dir, sock string
	cmd            *exec.Cmd
	exited         chan struct{}
}

// redisDirPrefix starts the name of every data directory of a lab Redis
// server, in os.TempDir().
const redisDirPrefix = "idemctl-lab-redis-"

// Files of a lab Redis server's directory besides its data.
const (
	redisOwnerFile = "lab.pid"   // the pid of the lab process that started it
	redisPIDFile   = "redis.pid" // the server's own pid
)

// startRedisServer starts a server of bin in a new temporary directory, which
// names the lab process that owns it.
func startRedisServer(ctx context.Context, bin string) (*redisServer, error) {
	dir, err := os.MkdirTemp("", redisDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("redis data directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, redisOwnerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("redis data directory: %w", err)
	}
	s := &redisServer{bin: bin, dir: dir, sock: filepath.Join(dir, "redis.sock")}
	if err := s.start(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *redisServer) start(ctx context.Context) error {
	cmd := exec.Command(s.bin, "--port", "0", "--unixsocket", s.sock, "--unixsocketperm", "700",
		"--dir", s.dir, "--dbfilename", "dump.rdb", "--save", "", "--appendonly", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"), "--pidfile", filepath.Join(s.dir, redisPIDFile), "--daemonize", "no")
	// Own process group: a Ctrl-C reaches the lab, which stops its server itself.
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(s.exited)
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: s.sock, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("redis-server exited at start: %s", s.logTail())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.kill()
			return fmt.Errorf("redis-server did not answer on %s: %w: %s", s.sock, err, s.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logTail is the end of the server's log, for an error message.
func (s *redisServer) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// snapshot writes the RDB file now (SAVE): what a restart will come back to.
func (s *redisServer) snapshot(ctx context.Context) error {
	c := s.client(nil)
	defer c.close()
	if err := c.c.Save(ctx).Err(); err != nil {
		return fmt.Errorf("redis SAVE: %w", err)
	}
	return nil
}

// crash SIGKILLs the server and starts it again on the same directory: it
// comes back with its last snapshot.
func (s *redisServer) crash(ctx context.Context) error {
	s.kill()
	return s.start(ctx)
}

func (s *redisServer) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// stop kills the server and removes its directory.
func (s *redisServer) stop() {
	s.kill()
	_ = os.RemoveAll(s.dir)
}

// redisClient sends the commands of a design's .redis file to the lab's server.
type redisClient struct {
	c    *redis.Client
	cmds statements
}

func (s *redisServer) client(cmds statements) *redisClient {
	return newRedisClient(s.sock, cmds)
}

func newRedisClient(sock string, cmds statements) *redisClient {
	return &redisClient{c: redis.NewClient(&redis.Options{Network: "unix", Addr: sock, MaxRetries: -1,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}), cmds: cmds}
}

func (c *redisClient) close() { _ = c.c.Close() }

// do runs the named command with its $n placeholders replaced by args. A nil
// reply comes back as redis.Nil.
func (c *redisClient) do(ctx context.Context, name string, args ...string) (any, error) {
	tmpl, ok := c.cmds[name]
	if !ok {
		panic("lab: no redis command " + name) // a programming error: the files are embedded
	}
	var argv []any
	for _, line := range strings.Split(tmpl, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if !strings.HasPrefix(f, "$") {
				argv = append(argv, f)
				continue
			}
			n, err := strconv.Atoi(f[1:])
			if err != nil || n < 1 || n > len(args) {
				return nil, fmt.Errorf("redis %s: placeholder %s has no argument", name, f)
			}
			argv = append(argv, args[n-1])
		}
	}
	v, err := c.c.Do(ctx, argv...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redis %s: %w", name, err)
	}
	return v, err
}

// loadRedisCommands reads a design's .redis file: "-- name: x" sections, one
// command each.
func loadRedisCommands(file string) (statements, error) {
	src, err := sqlFiles.ReadFile(file)
	if err != nil {
		return nil, err
	}
	cmds, err := parseStatements(string(src))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return cmds, nil
}

// dropStaleRedis stops the Redis servers of lab runs whose process is gone
// (killed before it could stop them) and removes their directories. It
// returns the directories it removed.
func dropStaleRedis() []string {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), redisDirPrefix+"*"))
	var dropped []string
	for _, dir := range dirs {
		owner, err := readPID(filepath.Join(dir, redisOwnerFile))
		if err != nil || processAlive(owner) {
			continue
		}
		if pid, err := readPID(filepath.Join(dir, redisPIDFile)); err == nil && isRedisOf(pid, dir) {
			killPID(pid)
		}
		if os.RemoveAll(dir) == nil {
			dropped = append(dropped, dir)
		}
	}
	return dropped
}

func readPID(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// isRedisOf tells whether pid is still the redis-server of dir, not another
// process that got its pid since.
func isRedisOf(pid int, dir string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(cmdline), filepath.Join(dir, "redis.sock"))
}

// startRedis starts the design's Redis server and the parent's client, and
// returns what stops both.
func (r *runner) startRedis(ctx context.Context, s *designState) (func(), error) {
	bin, err := findRedisServer(r.opts.RedisServer)
	if err != nil {
		return nil, err
	}
	cmds, err := loadRedisCommands(s.d.redisFile)
	if err != nil {
		return nil, err
	}
	for _, dir := range dropStaleRedis() {
		r.progress("stopped the leftover redis-server of a run that is gone and removed %s", dir)
	}
	if s.redis, err = startRedisServer(ctx, bin); err != nil {
		return nil, err
	}
	s.rc = s.redis.client(cmds)
	r.progress("%s: started its own redis-server (%s) on %s", s.d.Name, bin, s.redis.sock)
	return func() {
		s.rc.close()
		s.redis.stop()
	}, nil
}

// crashRedis SIGKILLs the design's Redis server and restarts it from its
// last snapshot, then reconnects the parent's client.
func (r *runner) crashRedis(ctx context.Context, s *designState) error {
	if err := s.redis.crash(ctx); err != nil {
		return fmt.Errorf("restart redis: %w", err)
	}
	cmds := s.rc.cmds
	s.rc.close()
	s.rc = s.redis.client(cmds)
	r.progress("%s: redis-server killed and restarted from its last snapshot", s.d.Name)
	return nil
}

// checkRedisServer fails a run before it starts when one of its designs needs
// a Redis server and there is none to start.
func checkRedisServer(ds []*designState, bin string) error {
	for _, s := range ds {
		if s.d.redisFile != "" {
			if _, err := findRedisServer(bin); err != nil {
				return fmt.Errorf("design %s: %w", s.d.Name, err)
			}
		}
	}
	return nil
}
