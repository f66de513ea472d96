"""Alerting: the rules (docs/architecture.md#alert-rules) turned into alerts, each written
once, and the incidents kept in step with them (docs/architecture.md#incidents)."""
