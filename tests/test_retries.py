"""Which failures Prefect retries: the cluster going away under a Dask stage, and
nothing that would fail again."""

from __future__ import annotations

import asyncio

import pytest
from distributed.comm.core import CommClosedError
from prefect.states import exception_to_failed_state

from horizonbench.core.errors import ConfigError
from horizonbench.tasks.cluster.client import lost_cluster
from horizonbench.tasks.generate.stage import generate_instances
from horizonbench.tasks.score.stage import score_attempts


def _failed(err: BaseException):
    return asyncio.run(exception_to_failed_state(err))


@pytest.mark.parametrize(
    ("err", "retried"),
    [
        (CommClosedError("scheduler went away"), True),
        (ConnectionResetError("reset by peer"), True),
        (TimeoutError("no reply"), True),
        (RuntimeError("a shard failed on its worker"), False),
        (ValueError("bad shard"), False),
        (ConfigError("workers run another horizonbench"), False),
    ],
)
def test_only_a_lost_cluster_is_retried(err, retried):
    assert lost_cluster(None, None, _failed(err)) is retried


def test_the_dask_stages_retry_on_it():
    for stage in (generate_instances, score_attempts):
        assert stage.retries == 2 and stage.retry_condition_fn is lost_cluster
