package main

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// newProducer is the bridge's Kafka producer (franz-go): acks from every in-sync replica
// and idempotence, so a confirmed record is on every replica and a retry adds no
// duplicate; no record ever times out (while Kafka is away it stays unacknowledged on
// MQTT), and a full buffer blocks the MQTT side, which holds the broker back.
func newProducer(c KafkaConfig, hooks kgo.Hook) (*kgo.Client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Bootstrap...),
		kgo.DefaultProduceTopic(c.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Duration(c.LingerMs * float64(time.Millisecond))),
		kgo.WithHooks(hooks),
	}
	if c.MaxBuffered > 0 {
		opts = append(opts, kgo.MaxBufferedRecords(c.MaxBuffered))
	}
	if c.MaxRecordBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(c.MaxRecordBytes))
	}
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	codec, err := compression(c.Compression)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	if c.TLS {
		cfg, err := tlsConfig(c.CA, c.Certificate, c.Key, "")
		if err != nil {
			return nil, fmt.Errorf("Kafka TLS: %w", err)
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	switch c.SASLMechanism {
	case "":
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: c.SASLUsername, Pass: c.SASLPassword}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASLUsername, Pass: c.SASLPassword}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASLUsername, Pass: c.SASLPassword}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("SASL mechanism %q is not one the bridge knows", c.SASLMechanism)
	}
	return kgo.NewClient(opts...)
}

func compression(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression %q is not one of none, gzip, snappy, lz4, zstd", name)
}

// reachability tells when Kafka is unreachable (kafka_reachable 0, an outage said once by
// python -m bridge): a connection failed and no record was confirmed for a second. One
// broker of a cluster down is no outage: the others go on confirming.
type reachability struct {
	stats  *stats
	events *events
}

// quiet is how long without a confirmation makes a failed connection an outage.
const quiet = time.Second

func (r *reachability) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		return
	}
	r.stats.update(func(s *report) {
		if s.KafkaReachable && time.Since(r.stats.lastConfirmed) >= quiet {
			s.KafkaReachable = false
			s.Errors[errKafkaUnreachable]++
		}
	})
	where := net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port))
	r.events.emit("kafka_error", map[string]string{"text": fmt.Sprintf("%s: %v", where, err)})
}

// refusal names a failed delivery: Kafka's error code where it gave one.
func refusal(err error) (code, text string) {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message, err.Error()
	}
	return "client", err.Error()
}
