// The bridge's engine: MQTT in, Kafka out, at least once (docs/devices.md). `python -m
// bridge` checks the settings, starts this program with them on its standard input,
// serves /metrics and words what it reports; this program moves the readings
// (bridge/engine/README.md).
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

func main() {
	os.Exit(run())
}

func run() int {
	// One P unless GOMAXPROCS says otherwise: each message passes through several of
	// paho's goroutines, and with a P per core every handoff wakes another thread, which
	// on cores the broker, Kafka and the job share waits its turn. At 5,000 readings/s on
	// 2 shared cores one P took the bridge's publish-to-Kafka p50 from 78 to 8 ms and its
	// CPU per reading from 43 to 31 µs (docs/benchmarks.md#mqtt-in-the-bridge).
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	cfg, err := readConfig(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bridge engine:", err)
		return 2
	}
	ev := newEvents(os.Stdout)
	e, err := newEngine(cfg, ev)
	if err != nil {
		ev.emit("fatal", map[string]string{"reason": err.Error()})
		return 2
	}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	abort := make(chan struct{})
	go func() {
		<-signals
		close(e.stop)
		<-signals // a second signal: stop waiting for Kafka
		close(abort)
	}()
	go orphaned()
	done := make(chan struct{})
	go e.report(done)
	e.run()
	e.shutDown(abort)
	close(done)
	n, _ := e.book.flight()
	r := e.stats.snapshot(n, 0)
	ev.emit("stopped", map[string]uint64{
		"received": r.Received, "forwarded": r.Forwarded,
		"acknowledged": r.Acknowledged, "unacknowledged": uint64(n),
	})
	if e.fatal.Load() {
		return 2
	}
	return 0
}

// report writes a stats line every stats_every seconds until done is closed.
func (e *engine) report(done <-chan struct{}) {
	tick := time.NewTicker(time.Duration(e.cfg.StatsEvery * float64(time.Second)))
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			n, age := e.book.flight()
			e.events.emit("stats", e.stats.snapshot(n, age))
		}
	}
}

// orphaned ends the engine at once when python -m bridge is gone, killed too: it keeps
// the engine's standard input open, and its end comes when that process ends. (The next
// stats line, to a pipe nobody reads, would end it too, by SIGPIPE, but only then.)
func orphaned() {
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(1)
}
