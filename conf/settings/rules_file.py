"""The alert rules file a program reads (contract/rules/, docs/alerting.md)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, PrivateAttr, model_validator

from conf.paths import RULES_FILE
from conf.settings.base import ProgramSettings, env_name
from contract.rules.model import RuleSet
from contract.rules.parsing import RulesError, read_rules


class RulesSettings(ProgramSettings):
    """The alert rules file (contract/rules/, docs/alerting.md): the job alerts by it,
    the producer scripts incidents around its thresholds, the dashboard draws them, the
    notifier ends episodes by their resolve holds. Read and checked at start."""

    rules: Path = Field(
        RULES_FILE, description="the alert rules file (TOML, docs/alerting.md), checked at start"
    )
    _rule_set: RuleSet | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _rules_valid(self) -> RulesSettings:
        try:
            self._rule_set = read_rules(self.rules)
        except RulesError as exc:
            raise ValueError(f"--rules ({env_name('rules')}): {exc}") from None
        return self

    @property
    def alert_rules(self) -> RuleSet:
        """The rules of ``rules`` as read at start."""
        assert self._rule_set is not None  # set by validation
        return self._rule_set
