"""Prometheus' text format read back into samples, by name and labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value of a Prometheus text exposition."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
