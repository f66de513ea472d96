"""The one poll with a deadline (common/waiting.py), and the tests' wait built on it
(tests/support/polling.py)."""

from __future__ import annotations

import pytest

from common.waiting import poll_until
from tests.support.polling import wait_until


def test_a_poll_returns_what_held_or_the_last_answer_at_its_deadline() -> None:
    answers = iter(range(10))
    assert poll_until(lambda: next(answers), 5, 0.001, lambda n: n >= 3) == 3
    assert poll_until(lambda: 0, 0.05, 0.01) == 0  # the deadline: the last, falsy, answer
    assert poll_until(lambda: "ready", 0, 1) == "ready"  # one look even without time

    def dead() -> bool:
        raise RuntimeError("exited")

    with pytest.raises(RuntimeError, match="exited"):
        poll_until(dead, 5, 0.01)


def test_a_wait_that_runs_out_says_what_it_waited_for_and_what_it_saw() -> None:
    seen = iter(range(100))
    with pytest.raises(AssertionError) as failed:
        wait_until(lambda: False, 0.05, "the lake", every=0.01, detail=lambda: f"{next(seen)} rows")
    assert str(failed.value) == "not within 0.05s: the lake\n0 rows"  # asked once, at the end
    with pytest.raises(AssertionError, match=r"^not within 0s: the lake$"):
        wait_until(lambda: 0, 0, "the lake")
    assert wait_until(lambda: 7, 1, "seven", detail=lambda: 1 / 0) == 7  # no detail on success
