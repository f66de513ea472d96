package main

import (
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

const (
	// hotC is above conf/rules.toml's overheat threshold (45 °C) for an unregistered
	// sensor; normalC is a calm reading's.
	hotC    = 60.0
	normalC = 21.5
	// sensorsPerDevice is how many sensors a device's calm readings rotate over.
	sensorsPerDevice = 50
)

// readings makes one device's readings: the event of docs/architecture.md, plus the
// instant it is sent (bench_sent_ns).
type readings struct {
	site    string
	topic   string // contract/devices.py TopicLayout's template, {site} filled in
	sensors []string
	rng     *rand.Rand
	buf     []byte
}

// newReadings is site's readings, published under layout (a TopicLayout template). The
// event ids are seeded by the clock: a run's readings are new to a job that saw the
// last run's.
func newReadings(site, layout string) *readings {
	h := fnv.New64a()
	h.Write([]byte(site))
	r := &readings{
		site:  site,
		topic: strings.ReplaceAll(layout, "{site}", site),
		rng:   rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), h.Sum64())),
	}
	for n := range sensorsPerDevice {
		r.sensors = append(r.sensors, site+"-sensor-"+pad3(n))
	}
	return r
}

func pad3(n int) string {
	s := strconv.Itoa(n)
	for len(s) < 3 {
		s = "0" + s
	}
	return s
}

// next is a reading of sensor: its topic, its JSON and the wall-clock nanosecond in it.
func (r *readings) next(sensor string, seq int, temperature float64) (string, []byte, int64) {
	now := time.Now()
	b := r.buf[:0]
	b = append(b, `{"event_id":"`...)
	b = r.uuid4(b)
	b = append(b, `","sensor_id":"`...)
	b = append(b, sensor...)
	b = append(b, `","event_time":"`...)
	b = now.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z")
	b = append(b, `","temperature_c":`...)
	b = strconv.AppendFloat(b, temperature, 'f', 1, 64)
	b = append(b, `,"humidity_pct":40.0,"battery_pct":90.0,"seq":`...)
	b = strconv.AppendInt(b, int64(seq), 10)
	b = append(b, `,"bench_sent_ns":`...)
	sent := now.UnixNano()
	b = strconv.AppendInt(b, sent, 10)
	b = append(b, '}')
	r.buf = b
	// The client keeps the payload until it is acknowledged: a copy of its own.
	body := make([]byte, len(b))
	copy(body, b)
	return strings.Replace(r.topic, "{sensor_id}", sensor, 1), body, sent
}

// uuid4 appends a random (version 4) UUID: event ids unique within a run.
func (r *readings) uuid4(b []byte) []byte {
	const hex = "0123456789abcdef"
	var u [16]byte
	hi, lo := r.rng.Uint64(), r.rng.Uint64()
	for i := range 8 {
		u[i], u[8+i] = byte(hi>>(8*i)), byte(lo>>(8*i))
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&0x0f])
	}
	return b
}
