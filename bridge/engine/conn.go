package main

import (
	"bufio"
	"crypto/tls"
	"net"
	"net/url"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// dialBroker opens the MQTT connection (TCP, or TLS for ssl://) as a batchedConn: paho
// reads each packet's header a few bytes at a time and writes each acknowledgement on
// its own, two thirds of the engine's CPU in system calls at 5,000 readings/s (measured
// with pprof, docs/appendix/benchmark-runs.md#mqtt-in-the-bridge-issue-70).
func dialBroker(tlsConfig *tls.Config, timeout time.Duration) mqtt.OpenConnectionFunc {
	return func(uri *url.URL, _ mqtt.ClientOptions) (net.Conn, error) {
		dialer := &net.Dialer{Timeout: timeout}
		var c net.Conn
		var err error
		if uri.Scheme == "ssl" {
			c, err = tls.DialWithDialer(dialer, "tcp", uri.Host, tlsConfig)
		} else {
			c, err = dialer.Dial("tcp", uri.Host)
		}
		if err != nil {
			return nil, err
		}
		return newBatchedConn(c), nil
	}
}

// batchedConn reads through a buffer, and writes what paho hands it in batches: a write
// is queued and a flusher sends everything queued meanwhile in one system call, so a
// lone acknowledgement goes out at once and a thousand queued behind a send go out
// together. Close sends what is queued first (the acknowledgements and DISCONNECT of a
// clean stop).
type batchedConn struct {
	net.Conn
	reader *bufio.Reader

	mu      sync.Mutex
	queued  []byte
	err     error // the first failed write: returned to every later one
	closing bool
	kick    chan struct{}
	done    chan struct{}
}

func newBatchedConn(c net.Conn) *batchedConn {
	b := &batchedConn{
		Conn: c, reader: bufio.NewReaderSize(c, 64<<10),
		kick: make(chan struct{}, 1), done: make(chan struct{}),
	}
	go b.flush()
	return b
}

func (b *batchedConn) Read(p []byte) (int, error) {
	return b.reader.Read(p)
}

func (b *batchedConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	if b.err != nil || b.closing {
		err := b.err
		b.mu.Unlock()
		if err == nil {
			err = net.ErrClosed
		}
		return 0, err
	}
	b.queued = append(b.queued, p...)
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default: // the flusher is already due
	}
	return len(p), nil
}

// flush sends what is queued each time it is kicked, until Close.
func (b *batchedConn) flush() {
	defer close(b.done)
	var out []byte
	for range b.kick {
		b.mu.Lock()
		out, b.queued = b.queued, out[:0]
		closing := b.closing
		b.mu.Unlock()
		if len(out) > 0 {
			if _, err := b.Conn.Write(out); err != nil {
				b.mu.Lock()
				b.err = err
				b.mu.Unlock()
			}
		}
		if closing {
			return
		}
	}
}

// Close sends what is queued, then closes the connection.
func (b *batchedConn) Close() error {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return b.Conn.Close()
	}
	b.closing = true
	b.mu.Unlock()
	b.kick <- struct{}{} // blocks until the flusher takes the last batch
	select {
	case <-b.done:
	case <-time.After(5 * time.Second): // a peer that reads nothing more
	}
	return b.Conn.Close()
}
