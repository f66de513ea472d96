package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Connect return codes of a refused login: identifier rejected, bad user name or
// password, not authorised.
var refusedLogin = map[byte]bool{
	packets.ErrRefusedIDRejected:            true,
	packets.ErrRefusedBadUsernameOrPassword: true,
	packets.ErrRefusedNotAuthorised:         true,
}

// engine is one bridge: an MQTT session in, a Kafka producer out, the book between.
type engine struct {
	cfg    *Config
	events *events
	stats  *stats
	book   *book
	kafka  *kgo.Client
	mqtt   mqtt.Client

	stopping atomic.Bool // no more intake: later messages stay unacknowledged
	// produceCtx ends a produce waiting for room in a full buffer: a stop's abort.
	produceCtx   context.Context
	abortProduce context.CancelFunc
	stop         chan struct{}
	lost         chan error // the session's connection ended
	// fatal: the broker refused the login or the subscription before the first
	// connection; the engine ends.
	fatal atomic.Bool
}

func newEngine(cfg *Config, ev *events) (*engine, error) {
	e := &engine{
		cfg: cfg, events: ev, stats: newStats(cfg.LatencyBuckets), book: newBook(time.Now),
		stop: make(chan struct{}), lost: make(chan error, 1),
	}
	e.produceCtx, e.abortProduce = context.WithCancel(context.Background())
	go e.book.sendAcks()
	producer, err := newProducer(cfg.Kafka, &reachability{stats: e.stats, events: ev})
	if err != nil {
		return nil, err
	}
	e.kafka = producer
	client, err := e.newSession()
	if err != nil {
		producer.Close()
		return nil, err
	}
	e.mqtt = client
	return e, nil
}

// newSession is the MQTT 3.1.1 client: a persistent session (clean session false, a fixed
// client id), manual acknowledgements, and reconnection done by the engine itself (run),
// which sees each connection's session flag and refusals.
func (e *engine) newSession() (mqtt.Client, error) {
	c := e.cfg.MQTT
	scheme := "tcp"
	opts := mqtt.NewClientOptions()
	var tlsCfg *tls.Config
	if c.TLS {
		scheme = "ssl"
		cfg, err := tlsConfig(c.CA, c.Certificate, c.Key, c.Host)
		if err != nil {
			return nil, fmt.Errorf("MQTT TLS: %w", err)
		}
		tlsCfg = cfg
	}
	opts.AddBroker(scheme + "://" + net.JoinHostPort(c.Host, strconv.Itoa(c.Port)))
	opts.SetCustomOpenConnectionFn(dialBroker(tlsCfg, 10*time.Second))
	opts.SetClientID(c.ClientID).SetProtocolVersion(4).SetCleanSession(false)
	opts.SetKeepAlive(time.Duration(c.Keepalive) * time.Second)
	opts.SetConnectTimeout(10 * time.Second)
	opts.SetAutoReconnect(false).SetConnectRetry(false).SetResumeSubs(false)
	opts.SetAutoAckDisabled(true).SetOrderMatters(true)
	// A resumed session's queued readings may come before the SUBACK: they reach the
	// default handler.
	opts.SetDefaultPublishHandler(e.onMessage)
	opts.SetConnectionLostHandler(func(_ mqtt.Client, err error) {
		select {
		case e.lost <- err:
		default:
		}
	})
	if c.Username != "" {
		opts.SetUsername(c.Username).SetPassword(c.Password)
	}
	return mqtt.NewClient(opts), nil
}

// onMessage runs on paho's router goroutine, in arrival order.
func (e *engine) onMessage(_ mqtt.Client, m mqtt.Message) {
	if e.stopping.Load() {
		return // not acknowledged: the broker sends it again to the next session
	}
	var ack func()
	if m.Qos() > 0 {
		ack = m.Ack
	}
	en := e.book.received(ack)
	rec := toRecord(m.Topic(), m.Payload(), en.received, e.cfg)
	e.stats.update(func(r *report) {
		r.Received++
		if m.Duplicate() {
			r.Redelivered++
		}
		if len(rec.Key) == 0 {
			r.Errors[errTopicNoSensor]++
		}
	})
	e.produce(en.seq, rec)
}

func (e *engine) produce(seq uint64, rec *kgo.Record) {
	// Blocks while the producer's buffer is full: that holds paho's reading back, and
	// the broker with it. A stop's abort (the context) ends the wait.
	e.kafka.Produce(e.produceCtx, rec, func(r *kgo.Record, err error) {
		e.delivered(seq, r, err)
	})
}

// delivered runs on the producer's goroutines when Kafka confirmed or refused seq.
func (e *engine) delivered(seq uint64, rec *kgo.Record, err error) {
	if err != nil {
		e.refused(seq, rec, err)
		return
	}
	settled, waited := e.book.delivered(seq)
	e.stats.forwarded(waited, settled)
}

// refused: a record Kafka (or the client) refused is sent again after a pause, doubling
// up to the longest; never dropped, and nothing after it is acknowledged meanwhile.
func (e *engine) refused(seq uint64, rec *kgo.Record, err error) {
	if errors.Is(err, context.Canceled) {
		return // a stop's abort: it stays unacknowledged, and the broker sends it again
	}
	e.stats.update(func(r *report) { r.Errors[errKafkaDelivery]++ })
	code, text := refusal(err)
	e.events.emit("record_refused", map[string]string{"code": code, "text": text})
	en := e.book.pending(seq)
	if en == nil || e.stopping.Load() {
		return // its connection was lost, or the bridge stops: the broker sends it again
	}
	low, high := e.cfg.RetryBackoff[0], e.cfg.RetryBackoff[1]
	pause := math.Min(high, low*math.Pow(2, float64(en.attempts-1)))
	en.attempts++
	again := &kgo.Record{Key: rec.Key, Value: rec.Value, Headers: rec.Headers}
	time.AfterFunc(time.Duration(pause*float64(time.Second)), func() {
		if !e.stopping.Load() && e.book.pending(seq) != nil {
			e.produce(seq, again)
		}
	})
}

// run keeps the session connected until stop is closed; it returns early when the broker
// refused the login or the subscription before any connection stood.
func (e *engine) run() {
	lo := time.Duration(e.cfg.MQTT.ReconnectMin * float64(time.Second))
	hi := time.Duration(e.cfg.MQTT.ReconnectMax * float64(time.Second))
	delay, everUp := lo, false
	for {
		err := e.connect()
		if err != nil {
			if errors.Is(err, errRefused) && !everUp {
				e.fatal.Store(true)
				return
			}
			select {
			case <-e.stop:
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, hi)
			continue
		}
		everUp, delay = true, lo
		select {
		case <-e.stop:
			return
		case err := <-e.lost:
			forgotten := e.book.connectionLost()
			e.stats.update(func(r *report) {
				r.MQTTConnected = false
				r.Errors[errMQTTConnection]++
			})
			e.events.emit("down", map[string]any{"reason": err.Error(), "forgotten": forgotten, "was_up": true})
		}
	}
}

var errRefused = errors.New("refused")

// connect makes one connection and subscribes; it reports up, down, refused or
// unverified (the broker's TLS certificate).
func (e *engine) connect() error {
	select {
	case <-e.lost: // a loss of an earlier connection not taken yet
	default:
	}
	token := e.mqtt.Connect()
	token.Wait()
	if err := token.Error(); err != nil {
		ct, _ := token.(*mqtt.ConnectToken)
		if ct != nil && refusedLogin[ct.ReturnCode()] {
			e.stats.update(func(r *report) { r.Errors[errMQTTConnection]++ })
			e.events.emit("refused", map[string]string{"reason": err.Error()})
			return errRefused
		}
		var unverified *tls.CertificateVerificationError
		if errors.As(err, &unverified) {
			// A broker the bridge cannot trust: its settings' fault before the first
			// connection (the engine ends), a certificate being renewed after it.
			e.stats.update(func(r *report) { r.Errors[errMQTTConnection]++ })
			e.events.emit("unverified", map[string]string{"reason": unverified.Err.Error()})
			return errRefused
		}
		e.events.emit("down", map[string]any{"reason": err.Error(), "forgotten": 0, "was_up": false})
		return err
	}
	session := token.(*mqtt.ConnectToken).SessionPresent()
	// Again on every connection: a broker that lost the session has no subscription left.
	sub := e.mqtt.Subscribe(e.cfg.MQTT.Subscription, 1, e.onMessage)
	sub.Wait()
	err := sub.Error()
	if err == nil {
		for _, granted := range sub.(*mqtt.SubscribeToken).Result() {
			if granted == 0x80 {
				err = fmt.Errorf("subscription to %s refused", e.cfg.MQTT.Subscription)
			}
		}
	}
	if err != nil {
		e.stats.update(func(r *report) { r.Errors[errMQTTConnection]++ })
		e.events.emit("refused", map[string]string{"reason": err.Error()})
		e.mqtt.Disconnect(0)
		e.book.connectionLost()
		return errRefused
	}
	e.stats.update(func(r *report) { r.MQTTConnected = true })
	e.events.emit("up", map[string]bool{"session_present": session})
	return nil
}

// shutDown stops the intake, waits up to the shutdown timeout (or until abort is
// closed) for Kafka to confirm what is in flight, whose acknowledgements then go out,
// and disconnects cleanly: the session stays with the broker for the next start.
func (e *engine) shutDown(abort <-chan struct{}) {
	e.stopping.Store(true)
	if !e.fatal.Load() {
		e.events.emit("stopping", map[string]int64{"waiting": e.kafka.BufferedProduceRecords()})
	}
	timeout := time.Duration(e.cfg.ShutdownTimeout * float64(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	go func() {
		select {
		case <-abort:
			cancel()
			e.abortProduce()
		case <-ctx.Done():
		}
	}()
	_ = e.kafka.Flush(ctx)
	cancel()
	e.book.waitAcks(5 * time.Second)
	if e.mqtt.IsConnectionOpen() {
		e.mqtt.Disconnect(250) // the acknowledgements handed to paho go first
	}
	e.kafka.Close()
}
