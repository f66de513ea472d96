"""The SensorWatch producer: a simulated sensor fleet that sends JSON readings to Kafka."""
