package main

import (
	"bytes"
	"testing"
	"time"
)

var layoutCfg = &Config{SensorLevel: 2, HeaderTopic: "mqtt_topic", HeaderArrival: "mqtt_received_at"}

func TestARecordKeepsThePayloadAndSaysWhereAndWhen(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 15, 30, 123456789, time.FixedZone("IST", 5*3600+1800))
	r := toRecord("sensors/north/sensor-0001/readings", []byte("\xff not json"), at, layoutCfg)
	if string(r.Key) != "sensor-0001" || !bytes.Equal(r.Value, []byte("\xff not json")) {
		t.Fatalf("key %q value %q", r.Key, r.Value)
	}
	want := map[string]string{
		"mqtt_topic":       "sensors/north/sensor-0001/readings",
		"mqtt_received_at": "2026-12-06T04:45:30.123Z", // UTC, whatever the zone given
	}
	for _, h := range r.Headers {
		if want[h.Key] != string(h.Value) {
			t.Fatalf("header %s = %q, want %q", h.Key, h.Value, want[h.Key])
		}
		delete(want, h.Key)
	}
	if len(want) != 0 {
		t.Fatalf("headers missing: %v", want)
	}
}

func TestATopicWithoutASensorGoesWithAnEmptyKey(t *testing.T) {
	// Empty, not nil: the job quarantines it (key_without_sensor), where it would judge a
	// record without a key by its payload alone.
	for _, topic := range []string{"sensors/north//readings", "sensors/north"} {
		r := toRecord(topic, []byte("{}"), time.Now(), layoutCfg)
		if r.Key == nil || len(r.Key) != 0 {
			t.Fatalf("%s: key %#v, want empty and not nil", topic, r.Key)
		}
	}
}
