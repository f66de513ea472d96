package main

import (
	"bufio"
	"encoding/json"
	"io"
	"sync"
)

// events writes what the engine has to report, one JSON object a line, for `python -m
// bridge` to word and count (bridge/engine.py): the engine itself says nothing to people.
type events struct {
	mu  sync.Mutex
	out *bufio.Writer
	enc *json.Encoder
}

func newEvents(w io.Writer) *events {
	out := bufio.NewWriter(w)
	return &events{out: out, enc: json.NewEncoder(out)}
}

// emit writes {kind: body}.
func (e *events) emit(kind string, body any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.enc.Encode(map[string]any{kind: body})
	_ = e.out.Flush()
}
