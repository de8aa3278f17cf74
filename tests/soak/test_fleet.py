"""The fleet soak (``nox -s soak``, run by ``.ci/run``): the production shape under
load and faults loses nothing.

At least 4 worker processes run the agent graph with ``ArsSummarizationMiddleware``
over 50 threads on a PostgreSQL checkpointer and files on (moto) S3, while
workers are SIGKILLed (at kill points and at random), S3 is slow and fails in
bursts, PostgreSQL connections are dropped, clients disconnect and runs of one
thread race (see :mod:`tests.soak.fleet`). The oracles are the invariants read
back from the stores. A soak with one guarantee broken on purpose must fail, so
the checks are shown to bite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.servers import S3Server
from tests.soak.fleet import Fleet, Plan, Report, check

pytestmark = pytest.mark.soak


def soak(
    plan: Plan, pg_url: str, s3: S3Server, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Fleet, Report]:
    fleet = Fleet(plan, pg_url, s3, workdir)
    fleet.run()
    report = check(fleet)
    with capsys.disabled():
        print("\nfleet soak: " + "\n            ".join(report.lines()))
        for line in report.violations[:20]:
            print(f"  violation: {line}")
    return fleet, report


@pytest.mark.spec("R24", "R44", "R52", "R55", "R56", "R57")
def test_a_fleet_under_kills_and_store_faults_loses_nothing(
    pg_setup: str, s3_endpoint: S3Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, report = soak(Plan(), pg_setup, s3_endpoint, tmp_path, capsys)
    assert report.violations == []
    assert report.plan.workers >= 4 and report.plan.threads >= 50
    assert report.ok_runs >= report.plan.threads * report.plan.turns
    assert report.kills >= 20, "fewer kills than the soak promises"
    assert report.l2_rounds >= 2 * report.plan.threads, "too few L2 rounds to mean anything"
    assert report.s3_errors > 0 and report.pg_drops > 0 and report.disconnects > 0
    assert report.retries > 0 and report.races == report.plan.races > 0
    assert report.files_checked > report.plan.threads
    assert report.store_files_checked > 0  # the threads whose files are in the store


SMALL = {
    "workers": 2,
    "threads": 6,
    "turns": 6,
    "kill_share": 0.0,
    "random_kills": 0,
    "disconnect_share": 0.0,
    "races": 0,
    "pg_drops": 0,
    "s3_bursts": 0,
}


@pytest.mark.parametrize(
    ("broken", "expected"),
    [
        ("scope", "which its folder does not hold"),  # every thread writes into one folder
        ("archive", "which its folder does not hold"),  # archives "written" but dropped
    ],
)
def test_the_soak_fails_when_a_guarantee_is_broken(
    broken: str,
    expected: str,
    pg_setup: str,
    s3_endpoint: S3Server,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fleet, report = soak(Plan(broken=broken, **SMALL), pg_setup, s3_endpoint, tmp_path, capsys)
    assert report.l2_rounds > 0
    assert any(expected in v for v in report.violations), report.violations[:5]
    if broken == "archive":  # dropped from the store too: its threads are checked as closely
        store_threads = {t.name for t in fleet.threads if t.files == "store"}
        assert any(v.split(":")[0] in store_threads for v in report.violations)
