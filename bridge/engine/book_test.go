package main

import (
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func acker(sent *[]int, id int) func() {
	return func() { *sent = append(*sent, id) }
}

// settle is delivered, with the acknowledgements it queued sent.
func settle(b *book, seq uint64) int {
	n, _ := b.delivered(seq)
	for len(b.acks) > 0 {
		(<-b.acks)()
	}
	return n
}

func TestAcknowledgementsGoInArrivalOrder(t *testing.T) {
	b := newBook(time.Now)
	var sent []int
	for id := 1; id <= 3; id++ {
		b.received(acker(&sent, id))
	}
	if n := settle(b, 2); n != 0 || len(sent) != 0 {
		t.Fatalf("the second confirmed first: settled %d, sent %v; want nothing yet", n, sent)
	}
	if n := settle(b, 0); n != 1 || len(sent) != 1 || sent[0] != 1 {
		t.Fatalf("the first confirmed: settled %d, sent %v; want [1]", n, sent)
	}
	if n := settle(b, 1); n != 2 || len(sent) != 3 || sent[1] != 2 || sent[2] != 3 {
		t.Fatalf("the second confirmed: settled %d, sent %v; want [1 2 3]", n, sent)
	}
	if b.pending(2) != nil {
		t.Fatal("an acknowledged message is still pending")
	}
}

func TestQoS0MessagesTakeTheirTurnWithoutAnAcknowledgement(t *testing.T) {
	b := newBook(time.Now)
	var sent []int
	b.received(nil)
	b.received(acker(&sent, 2))
	if n := settle(b, 1); n != 0 {
		t.Fatalf("settled %d before the QoS 0 message ahead was confirmed", n)
	}
	if n := settle(b, 0); n != 2 || len(sent) != 1 || sent[0] != 2 {
		t.Fatalf("settled %d, sent %v; want 2 settled and [2] sent", n, sent)
	}
}

func TestALostConnectionForgetsItsMessages(t *testing.T) {
	b := newBook(time.Now)
	var sent []int
	old := b.received(acker(&sent, 1))
	if n := b.connectionLost(); n != 1 {
		t.Fatalf("forgot %d, want 1", n)
	}
	fresh := b.received(acker(&sent, 2))
	if fresh.seq == old.seq {
		t.Fatal("a new connection's message took a forgotten one's number")
	}
	if n := settle(b, old.seq); n != 0 || len(sent) != 0 {
		t.Fatalf("a forgotten message was acknowledged: settled %d, sent %v", n, sent)
	}
	if n := settle(b, fresh.seq); n != 1 || len(sent) != 1 || sent[0] != 2 {
		t.Fatalf("settled %d, sent %v; want [2]", n, sent)
	}
}

func TestTheOldestUnacknowledgedAge(t *testing.T) {
	c := &clock{time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
	b := newBook(c.now)
	if n, age := b.flight(); n != 0 || age != 0 {
		t.Fatalf("empty book: %d, %v", n, age)
	}
	b.received(nil)
	c.t = c.t.Add(2 * time.Second)
	b.received(nil)
	c.t = c.t.Add(time.Second)
	if n, age := b.flight(); n != 2 || age != 3*time.Second {
		t.Fatalf("flight %d, %v; want 2, 3s", n, age)
	}
	if _, waited := b.delivered(0); waited != 3*time.Second {
		t.Fatalf("the first waited %v, want 3s", waited)
	}
	if n, age := b.flight(); n != 1 || age != time.Second {
		t.Fatalf("flight %d, %v; want 1, 1s", n, age)
	}
}
