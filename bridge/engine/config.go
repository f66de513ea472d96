package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Config is what `python -m bridge` hands the engine on its standard input, one JSON
// document (bridge/engine.py, engine_config): the settings, already checked, and the
// contract's names. Secrets come this way, never as arguments.
type Config struct {
	MQTT            MQTTConfig  `json:"mqtt"`
	Kafka           KafkaConfig `json:"kafka"`
	SensorLevel     int         `json:"sensor_level"` // the topic level naming the sensor (0-based)
	HeaderTopic     string      `json:"header_topic"` // the Kafka header holding the MQTT topic
	HeaderArrival   string      `json:"header_received_at"`
	LatencyBuckets  []float64   `json:"latency_buckets"`  // seconds, ascending
	StatsEvery      float64     `json:"stats_every"`      // seconds between stats lines
	RetryBackoff    [2]float64  `json:"retry_backoff"`    // a refused record: first and longest pause
	ShutdownTimeout float64     `json:"shutdown_timeout"` // seconds a stop waits for Kafka
}

// MQTTConfig is the session's broker, login and subscription.
type MQTTConfig struct {
	Host         string  `json:"host"`
	Port         int     `json:"port"`
	TLS          bool    `json:"tls"`
	CA           string  `json:"ca"`
	Certificate  string  `json:"certificate"`
	Key          string  `json:"key"`
	Username     string  `json:"username"`
	Password     string  `json:"password"`
	ClientID     string  `json:"client_id"`
	Keepalive    int     `json:"keepalive"`
	Subscription string  `json:"subscription"`
	ReconnectMin float64 `json:"reconnect_min"`
	ReconnectMax float64 `json:"reconnect_max"`
}

// KafkaConfig is the producer's cluster, security and batching.
type KafkaConfig struct {
	Bootstrap      []string `json:"bootstrap"`
	Topic          string   `json:"topic"`
	TLS            bool     `json:"tls"`
	CA             string   `json:"ca"`
	Certificate    string   `json:"certificate"`
	Key            string   `json:"key"`
	SASLMechanism  string   `json:"sasl_mechanism"`
	SASLUsername   string   `json:"sasl_username"`
	SASLPassword   string   `json:"sasl_password"`
	LingerMs       float64  `json:"linger_ms"`
	MaxBuffered    int      `json:"max_buffered"`
	Compression    string   `json:"compression"`
	MaxRecordBytes int32    `json:"max_record_bytes"` // 0: the client's default
	ClientID       string   `json:"client_id"`
}

func readConfig(r io.Reader) (*Config, error) {
	var c Config
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("the configuration on standard input: %w", err)
	}
	if c.MQTT.Subscription == "" || len(c.Kafka.Bootstrap) == 0 || c.Kafka.Topic == "" {
		return nil, fmt.Errorf("the configuration on standard input names no subscription, bootstrap servers or topic")
	}
	return &c, nil
}

// tlsConfig is a client's TLS: the CA's certificates (the system's when none), and a
// client certificate when one is given. The key is PEM, unencrypted.
func tlsConfig(ca, certificate, key, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", ca)
		}
		cfg.RootCAs = pool
	}
	if certificate != "" && key != "" {
		pair, err := tls.LoadX509KeyPair(certificate, key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
