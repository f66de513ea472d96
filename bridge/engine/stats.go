package main

import (
	"sort"
	"sync"
	"time"
)

// Error kinds, as sensorwatch_bridge_errors_total labels them (bridge/metrics.py).
const (
	errKafkaDelivery    = "kafka_delivery"
	errKafkaUnreachable = "kafka_unreachable"
	errMQTTConnection   = "mqtt_connection"
	errTopicNoSensor    = "topic_without_sensor"
)

// report is one stats line: the counts since the start and what is in flight now.
type report struct {
	Received       uint64            `json:"received"`
	Redelivered    uint64            `json:"redelivered"`
	Forwarded      uint64            `json:"forwarded"`
	Acknowledged   uint64            `json:"acknowledged"`
	Errors         map[string]uint64 `json:"errors"`
	MQTTConnected  bool              `json:"mqtt_connected"`
	KafkaReachable bool              `json:"kafka_reachable"`
	InFlight       int               `json:"in_flight"`
	OldestAge      float64           `json:"oldest_age"` // seconds
	// The forward latency: counts per bucket (not cumulative), the last one above the
	// last bound, and the sum of seconds.
	LatencyCounts []uint64 `json:"latency_counts"`
	LatencySum    float64  `json:"latency_sum"`
}

// stats are the engine's counts, written by its goroutines, read for each report.
type stats struct {
	mu            sync.Mutex
	bounds        []float64
	r             report
	lastConfirmed time.Time // Kafka's last confirmation (reachability)
}

func newStats(bounds []float64) *stats {
	return &stats{
		bounds: bounds,
		r: report{
			Errors:         map[string]uint64{},
			KafkaReachable: true,
			LatencyCounts:  make([]uint64, len(bounds)+1),
		},
	}
}

// update changes the counts under the lock.
func (s *stats) update(f func(r *report)) {
	s.mu.Lock()
	f(&s.r)
	s.mu.Unlock()
}

// forwarded counts a record Kafka confirmed after waited, which settled acknowledged
// messages (itself and those after it that waited for it).
func (s *stats) forwarded(waited time.Duration, acknowledged int) {
	seconds := waited.Seconds()
	i := sort.SearchFloat64s(s.bounds, seconds) // the first bound >= seconds
	s.mu.Lock()
	s.r.Forwarded++
	s.r.Acknowledged += uint64(acknowledged)
	s.r.KafkaReachable = true
	s.lastConfirmed = time.Now()
	s.r.LatencyCounts[i]++
	s.r.LatencySum += seconds
	s.mu.Unlock()
}

// snapshot is a copy to report, with what is in flight now.
func (s *stats) snapshot(inFlight int, oldest time.Duration) report {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.r
	c.Errors = make(map[string]uint64, len(s.r.Errors))
	for k, v := range s.r.Errors {
		c.Errors[k] = v
	}
	c.LatencyCounts = append([]uint64(nil), s.r.LatencyCounts...)
	c.InFlight, c.OldestAge = inFlight, oldest.Seconds()
	return c
}
