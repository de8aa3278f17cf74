"""Imported once by the soak's fork server: every module a worker needs, and the
default estimator's encoding loaded, so each (re)started worker begins warm, as a
long-running server worker is (a new worker's first count would otherwise load it)."""

from __future__ import annotations

import langchain.agents  # noqa: F401
import langgraph.checkpoint.postgres  # noqa: F401
import psycopg_pool  # noqa: F401
import s3fs  # noqa: F401

import ars_langchain.middleware
import ars_langchain.testing  # noqa: F401
import tests.soak.worker  # noqa: F401
from ars_core import default_estimator

default_estimator().count_text("warm")
