// Command sensorwatch-bench-devices is the devices of `scripts/bench --bridge`: each
// device (one MQTT connection, one site's login) publishes readings with QoS 1 into a
// local broker, each carrying the wall-clock nanosecond it was handed to the client
// (bench_sent_ns), paced at a rate or as fast as the broker acknowledges.
//
// It is compiled so that the bench measures the broker and the bridge, not a Python
// client's cost per message (bench/bridge.py starts it).
//
//	sensorwatch-bench-devices -port N -count N [-rate R] [-topic LAYOUT]
//		[-hot-every N -hot-log PREFIX] SITE=PASSWORD_FILE ...
//
// Each device prints one JSON line on stdout when it is done:
// {"device": SITE, "published": N, "acknowledged": M, "seconds": S}, and then one line of
// the process' CPU: {"cpu_user_s": U, "cpu_system_s": S}. With -hot-every, every
// N-th reading of a device is hot (above every overheat threshold) and from a sensor of
// its own, so the real-time path sends one alert for it alone; PREFIX.SITE.log gets a line
// "sensor_id sent_ns" per hot reading. Exit 0 when every reading was acknowledged.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// inFlight is how many readings a device has handed over before their acknowledgements:
// enough to keep a local broker busy without a queue that hides the pace.
const inFlight = 1000

// plan is one run, from the command line.
type plan struct {
	port     int
	count    int     // readings per device
	rate     float64 // readings/s per device; 0: as fast as acknowledged
	hotEvery int
	hotLog   string
	topic    string
	devices  []device
}

type device struct {
	user, passwordFile string
}

// result is a device's line on stdout.
type result struct {
	Device       string  `json:"device"`
	Published    int     `json:"published"`
	Acknowledged int     `json:"acknowledged"`
	Seconds      float64 `json:"seconds"`
	Error        string  `json:"error,omitempty"`
}

func parse(args []string) (*plan, error) {
	fs := flag.NewFlagSet("sensorwatch-bench-devices", flag.ContinueOnError)
	p := &plan{}
	fs.IntVar(&p.port, "port", 0, "the broker's MQTT port on 127.0.0.1")
	fs.IntVar(&p.count, "count", 0, "readings each device publishes")
	fs.Float64Var(&p.rate, "rate", 0, "readings/s per device; 0: as fast as acknowledged")
	fs.IntVar(&p.hotEvery, "hot-every", 0, "every N-th reading hot; 0: none")
	fs.StringVar(&p.hotLog, "hot-log", "", "PREFIX: each hot reading's send goes to PREFIX.SITE.log")
	fs.StringVar(&p.topic, "topic", "sensors/{site}/{sensor_id}/readings", "the topic layout")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case p.port < 1 || p.port > 65535:
		return nil, fmt.Errorf("-port %d: not a port", p.port)
	case p.count < 1:
		return nil, fmt.Errorf("-count %d: at least 1", p.count)
	case p.rate < 0:
		return nil, fmt.Errorf("-rate %g: not negative", p.rate)
	case p.hotEvery < 0:
		return nil, fmt.Errorf("-hot-every %d: not negative", p.hotEvery)
	case p.hotEvery > 0 && p.hotLog == "":
		return nil, errors.New("-hot-every needs -hot-log")
	case strings.Count(p.topic, "{sensor_id}") != 1:
		return nil, fmt.Errorf("-topic %q: needs {sensor_id} once", p.topic)
	case fs.NArg() == 0:
		return nil, errors.New("no device: name one as SITE=PASSWORD_FILE")
	}
	for _, arg := range fs.Args() {
		user, file, ok := strings.Cut(arg, "=")
		if !ok || user == "" || file == "" {
			return nil, fmt.Errorf("%q: a device is SITE=PASSWORD_FILE", arg)
		}
		p.devices = append(p.devices, device{user, file})
	}
	return p, nil
}

func main() {
	p, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench devices:", err)
		os.Exit(2)
	}
	results := make(chan result, len(p.devices))
	var wg sync.WaitGroup
	for _, d := range p.devices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- run(p, d)
		}()
	}
	wg.Wait()
	close(results)
	out := json.NewEncoder(os.Stdout)
	failed := false
	for r := range results {
		failed = failed || r.Error != "" || r.Acknowledged != r.Published
		_ = out.Encode(r)
	}
	// What the devices cost, so the bench can tell it from the broker's and the bridge's.
	var usage syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &usage) == nil {
		_ = out.Encode(map[string]float64{
			"cpu_user_s":   time.Duration(usage.Utime.Nano()).Seconds(),
			"cpu_system_s": time.Duration(usage.Stime.Nano()).Seconds(),
		})
	}
	if failed {
		os.Exit(1)
	}
}

// run is one device: connect, publish the plan's readings, wait for every
// acknowledgement (a minute at most for each).
func run(p *plan, d device) result {
	r := result{Device: d.user}
	secret, err := os.ReadFile(d.passwordFile)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	opts := mqtt.NewClientOptions().
		AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", p.port)).
		SetClientID(fmt.Sprintf("bench-%s-%d", d.user, time.Now().UnixNano()%1_000_000)).
		SetUsername(d.user).
		SetPassword(strings.TrimSpace(string(secret))).
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetOrderMatters(false).
		SetConnectTimeout(30 * time.Second)
	client := mqtt.NewClient(opts)
	if tok := client.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		r.Error = fmt.Sprintf("could not connect: %v", tok.Error())
		return r
	}
	defer client.Disconnect(1000)

	var hot *bufio.Writer
	if p.hotEvery > 0 {
		f, err := os.Create(fmt.Sprintf("%s.%s.log", p.hotLog, d.user))
		if err != nil {
			r.Error = err.Error()
			return r
		}
		defer f.Close()
		hot = bufio.NewWriter(f)
		defer hot.Flush()
	}

	// Tokens in publish order: a bounded channel is the in-flight limit, and one
	// goroutine counts the acknowledgements (QoS 1's come in order from one broker).
	pending := make(chan mqtt.Token, inFlight)
	acked := make(chan int, 1)
	go func() {
		n := 0
		for tok := range pending {
			if tok.WaitTimeout(time.Minute) && tok.Error() == nil {
				n++
			}
		}
		acked <- n
	}()

	gen := newReadings(d.user, p.topic)
	started := time.Now()
	for seq := range p.count {
		if p.rate > 0 {
			due := started.Add(time.Duration(float64(seq) / p.rate * float64(time.Second)))
			if ahead := time.Until(due); ahead > 0 {
				time.Sleep(ahead)
			}
		}
		var topic string
		var body []byte
		if p.hotEvery > 0 && seq%p.hotEvery == p.hotEvery-1 {
			sensor := fmt.Sprintf("%s-hot-%08d", d.user, seq)
			var sent int64
			topic, body, sent = gen.next(sensor, seq, hotC)
			fmt.Fprintf(hot, "%s %d\n", sensor, sent)
		} else {
			topic, body, _ = gen.next(gen.sensors[seq%len(gen.sensors)], seq, normalC)
		}
		pending <- client.Publish(topic, 1, false, body)
	}
	close(pending)
	r.Published = p.count
	r.Acknowledged = <-acked
	r.Seconds = time.Since(started).Seconds()
	return r
}
