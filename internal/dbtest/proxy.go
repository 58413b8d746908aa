package dbtest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards loopback connections to a PostgreSQL server and can cut them
// all at once, like a failover or a network partition does: while it is down,
// established connections are closed and new ones are closed as soon as they
// are accepted.
type Proxy struct {
	ln net.Listener

	mu     sync.Mutex
	target string
	down   bool
	conns  map[net.Conn]struct{}
}

// NewProxy starts a proxy to dsn's server, stopped when t ends, and returns it
// with a DSN that goes through it.
func NewProxy(t testing.TB, dsn string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("proxy: parse DSN: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: listen: %v", err)
	}
	p := &Proxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
	})
	go p.serve()
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *Proxy) pipe(c net.Conn) {
	p.mu.Lock()
	down, target := p.down, p.target
	p.mu.Unlock()
	if down {
		c.Close()
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore forwards new connections again, to target when it is not empty
// (host:port, e.g. a standby taking over).
func (p *Proxy) Restore(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if target != "" {
		p.target = target
	}
	p.down = false
}
