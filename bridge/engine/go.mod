module sensorwatch/bridge/engine

go 1.26.0

require (
	github.com/eclipse/paho.mqtt.golang v1.5.1
	github.com/twmb/franz-go v1.22.3
)

require (
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
	golang.org/x/net v0.44.0 // indirect
	golang.org/x/sync v0.17.0 // indirect
)
