"""`store_lock.lease_s`: the object-store writer lock's lease, parsed and range-checked (what
the runner gives the store; tests/integration/test_ray_jobs.py reads it back from a real lock)."""

from __future__ import annotations

import pytest

from orchestrator.errors import ConfigError
from orchestrator.run.config.load import load_run_config
from storage.lock import LEASE_S


def test_the_default_is_the_stores():
    assert load_run_config(["model=tiny"]).store_lock_lease_s == LEASE_S == 60.0


def test_a_lease_is_parsed():
    assert load_run_config(["model=tiny", "store_lock.lease_s=5"]).store_lock_lease_s == 5.0


@pytest.mark.parametrize("value", ["0.5", "7200", "soon"])
def test_a_bad_lease_names_the_key_and_the_range(value):
    with pytest.raises(ConfigError) as info:
        load_run_config(["model=tiny", f"store_lock.lease_s={value}"])
    message = str(info.value)
    assert "store_lock.lease_s must be a number >= 1 and <= 3600" in message
    assert "blocks the next run" in message
