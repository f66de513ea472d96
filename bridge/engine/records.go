package main

import (
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// toRecord is the Kafka record of a message on topic that reached the bridge at at: the
// payload unchanged, keyed by the sensor the topic names, with where and when it arrived
// as headers (contract/devices.py). The bridge judges nothing: a payload that is not a
// reading goes as it came, and a topic naming no sensor goes with an empty key; the job
// quarantines either with its reason.
func toRecord(topic string, payload []byte, at time.Time, cfg *Config) *kgo.Record {
	return &kgo.Record{
		Key:   sensorOf(topic, cfg.SensorLevel),
		Value: payload,
		Headers: []kgo.RecordHeader{
			{Key: cfg.HeaderTopic, Value: []byte(topic)},
			{Key: cfg.HeaderArrival, Value: []byte(iso(at))},
		},
	}
}

// sensorOf is the topic's sensor level: empty (not nil) where it is missing or empty.
func sensorOf(topic string, level int) []byte {
	levels := strings.Split(topic, "/")
	if level >= len(levels) {
		return []byte{}
	}
	return []byte(levels[level])
}

// iso is contract/times.py's iso: UTC, to the millisecond, with a Z.
func iso(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}
