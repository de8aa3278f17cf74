"""Files are written once (R52): after a restart, an agent's first call does not
rewrite the offloads an earlier process wrote; a torn or corrupted one is
detected and written again.

Two processes (``tests.langchain._restart_child``) run turns of the same
LangGraph agent on one SQLite checkpoint, with ARS's files on a local directory
or on S3 (moto server). Each process counts its writes through a wrapped fsspec
filesystem.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ars_core.l1 import sha256_text
from tests.langchain._restart_child import SIZES
from tests.langchain.helpers import big_output
from tests.procs import REPO_ROOT, repo_env
from tests.servers import S3Server


def _turn(turn: int, db: Path, thread_id: str, url: str, options: dict[str, Any]) -> Any:
    args = [str(turn), str(db), thread_id, url, json.dumps(options)]
    result = subprocess.run(
        [sys.executable, "-m", "tests.langchain._restart_child", *args],
        cwd=REPO_ROOT,
        env=repo_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def _final_targets(writes: list[str]) -> list[str]:
    """The files a process wrote under their final names (temporaries left out)."""
    return sorted(w.split(" ", 1)[1] for w in writes if ".ars-tmp-" not in w)


@pytest.mark.spec("R52", "R12")
@pytest.mark.parametrize("storage", ["local", "s3"])
def test_a_new_process_rewrites_only_torn_or_corrupted_offloads(
    storage: str, tmp_path: Path, request: pytest.FixtureRequest, thread_id: str
) -> None:
    """Process 1 offloads three tool results. An older version's torn write is
    simulated (one file cut in half) and one file is corrupted at the same size.
    Process 2 (a restart on the same checkpoint) re-offloads the same three results
    on its first call: it writes exactly the two damaged files, leaves the third
    untouched, and all three then hold their whole content."""
    texts = [big_output.invoke({"n": n}) for n in SIZES]
    rel = [f"outputs/large_tool_results/big_output-{sha256_text(t)}.txt" for t in texts]
    db = tmp_path / "checkpoints.sqlite"
    if storage == "local":
        root = tmp_path / "files"
        url, options = root.as_uri(), {}
        base = str(root / "threads" / thread_id)
    else:
        s3: S3Server = request.getfixturevalue("s3_endpoint")
        bucket = s3.create_bucket()
        url, options = f"s3://{bucket}/ars", s3.storage_options()
        base = f"{bucket}/ars/threads/{thread_id}"
    hosts = [f"{base}/{p}" for p in rel]

    first = _turn(1, db, thread_id, url, options)
    assert _final_targets(first["writes"]) == sorted(hosts), first["writes"]
    assert [any(p in s for s in first["sent"]) for p in rel] == [True, True, True]

    torn, corrupted, intact = hosts
    if storage == "local":
        Path(torn).write_bytes(texts[0].encode()[: len(texts[0]) // 2])
        Path(corrupted).write_bytes(b"\0" * len(texts[1].encode()))
        before = os.stat(intact)
    else:
        client = s3.client()
        key = corrupted.split("/", 1)[1]
        client.put_object(Bucket=bucket, Key=torn.split("/", 1)[1], Body=texts[0].encode()[:100])
        client.put_object(Bucket=bucket, Key=key, Body=b"\0" * len(texts[1].encode()))

    second = _turn(2, db, thread_id, url, options)
    assert _final_targets(second["writes"]) == sorted([torn, corrupted])
    assert [any(p in s for s in second["sent"]) for p in rel] == [True, True, True]
    if storage == "local":
        assert [Path(h).read_text(encoding="utf-8") for h in hosts] == texts
        after = os.stat(intact)
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    else:
        bodies = [
            client.get_object(Bucket=bucket, Key=h.split("/", 1)[1])["Body"].read().decode()
            for h in hosts
        ]
        assert bodies == texts
