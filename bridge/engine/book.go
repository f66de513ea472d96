package main

import (
	"sync"
	"time"
)

// entry is one message received from MQTT and not yet acknowledged.
type entry struct {
	seq       uint64
	ack       func() // sends the PUBACK; nil for a QoS 0 message
	received  time.Time
	delivered bool
	attempts  int
}

// book holds the messages in flight in arrival order (bridge/engine/README.md): a message
// is acknowledged once Kafka confirmed it and every message received before it, because
// MQTT wants a session's PUBACKs in the order of its PUBLISHes while Kafka confirms each
// partition on its own. Each connection is a generation: when it ends, its messages are
// forgotten (the broker sends them again on the next), so no acknowledgement of an
// earlier connection goes out on a later one.
type book struct {
	mu    sync.Mutex
	now   func() time.Time
	items []*entry // pending, oldest first; items[i].seq == first+i
	first uint64
	// acks takes the acknowledgements in order, for one goroutine to send: sending one
	// waits on paho's goroutines, which must not hold up Kafka's confirmations or the
	// next message's arrival. It has room for more than MQTT's 65,535 packet ids.
	acks chan func()
}

func newBook(now func() time.Time) *book {
	return &book{now: now, acks: make(chan func(), 1<<17)}
}

// sendAcks sends the acknowledgements in order until the book is closed.
func (b *book) sendAcks() {
	for ack := range b.acks {
		ack()
	}
}

// received notes a message just received on the current connection.
func (b *book) received(ack func()) *entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := &entry{seq: b.first + uint64(len(b.items)), ack: ack, received: b.now(), attempts: 1}
	b.items = append(b.items, e)
	return e
}

// pending is the entry seq while it waits, nil once acknowledged or forgotten.
func (b *book) pending(seq uint64) *entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.at(seq)
}

func (b *book) at(seq uint64) *entry {
	if seq < b.first || seq-b.first >= uint64(len(b.items)) {
		return nil
	}
	return b.items[seq-b.first]
}

// delivered notes Kafka's confirmation of seq and queues the acknowledgements, in order,
// of every message from the oldest on that is confirmed. It returns how many it settled
// (0 when seq was forgotten: its connection was lost), and how long seq waited. An
// acknowledgement queued for a connection that then ends is dropped by paho, which ties
// each to its connection.
func (b *book) delivered(seq uint64) (int, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.at(seq)
	if e == nil {
		return 0, 0
	}
	waited := b.now().Sub(e.received)
	e.delivered = true
	n := 0
	for n < len(b.items) && b.items[n].delivered {
		if ack := b.items[n].ack; ack != nil {
			b.acks <- ack
		}
		b.items[n] = nil
		n++
	}
	b.items = b.items[n:]
	b.first += uint64(n)
	return n, waited
}

// waitAcks returns once every acknowledgement queued so far is handed to paho, or after
// timeout.
func (b *book) waitAcks(timeout time.Duration) {
	done := make(chan struct{})
	b.acks <- func() { close(done) }
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

// connectionLost forgets the messages of the connection that ended; returns how many.
func (b *book) connectionLost() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.items)
	b.first += uint64(n)
	b.items = nil
	return n
}

// flight is how many messages wait and how long the oldest has waited.
func (b *book) flight() (int, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.items) == 0 {
		return 0, 0
	}
	age := b.now().Sub(b.items[0].received)
	if age < 0 {
		age = 0
	}
	return len(b.items), age
}
