"""SensorWatch configuration: where things are, which versions are pinned, and settings."""
