package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
	"time"
)

func TestAReadingIsTheEventWithItsSendInstant(t *testing.T) {
	r := newReadings("site-1", "sensors/{site}/{sensor_id}/readings")
	before := time.Now().UnixNano()
	topic, body, sent := r.next("site-1-sensor-007", 42, hotC)
	if topic != "sensors/site-1/site-1-sensor-007/readings" {
		t.Fatalf("topic %q", topic)
	}
	var event map[string]any
	decoder := json.NewDecoder(bytes.NewReader(body))
	decoder.UseNumber() // bench_sent_ns exactly
	if err := decoder.Decode(&event); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if event["sensor_id"] != "site-1-sensor-007" || event["seq"] != json.Number("42") ||
		event["temperature_c"] != json.Number("60.0") {
		t.Fatalf("event %v", event)
	}
	if ns, _ := event["bench_sent_ns"].(json.Number).Int64(); sent < before || ns != sent {
		t.Fatalf("sent %d, bench_sent_ns %v", sent, event["bench_sent_ns"])
	}
	stamp, err := time.Parse("2006-01-02T15:04:05.000Z", event["event_time"].(string))
	if err != nil || stamp.UnixMilli() != sent/1e6 {
		t.Fatalf("event_time %v (%v), sent %d", event["event_time"], err, sent)
	}
	uuid4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if !uuid4.MatchString(event["event_id"].(string)) {
		t.Fatalf("event_id %v", event["event_id"])
	}
}

func TestEachReadingHasABodyOfItsOwnAndANewEventID(t *testing.T) {
	r := newReadings("s", "{sensor_id}")
	_, first, _ := r.next("a", 1, normalC)
	kept := string(first)
	_, second, _ := r.next("b", 2, normalC)
	if string(first) != kept || string(first) == string(second) {
		t.Fatal("a later reading changed an earlier one's body")
	}
	ids := map[string]bool{}
	for seq := range 1000 {
		var event map[string]any
		_, body, _ := r.next("a", seq, normalC)
		_ = json.Unmarshal(body, &event)
		ids[event["event_id"].(string)] = true
	}
	if len(ids) != 1000 {
		t.Fatalf("%d distinct event ids of 1000", len(ids))
	}
}

func TestTheCommandLineIsChecked(t *testing.T) {
	p, err := parse([]string{"-port", "1883", "-count", "5", "-rate", "100", "a=/f", "b=/g"})
	if err != nil || len(p.devices) != 2 || p.devices[1] != (device{"b", "/g"}) || p.rate != 100 {
		t.Fatalf("%+v %v", p, err)
	}
	for _, bad := range [][]string{
		{"-port", "0", "-count", "1", "a=/f"},
		{"-port", "1", "-count", "0", "a=/f"},
		{"-port", "1", "-count", "1"},
		{"-port", "1", "-count", "1", "a"},
		{"-port", "1", "-count", "1", "-hot-every", "5", "a=/f"},
		{"-port", "1", "-count", "1", "-topic", "sensors/{site}", "a=/f"},
	} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}
