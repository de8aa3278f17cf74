"""Fixtures of the fleet soak (``nox -s soak``): the checkpoint tables on the session's
PostgreSQL cluster (the moto S3 server is the suite's ``s3_endpoint``), and ``langgraph dev`` serving
the example graph (the end-to-end tests' fixture)."""

from __future__ import annotations

from tests.e2e.conftest import langgraph_server
from tests.langchain.conftest import pg_setup

__all__ = ["langgraph_server", "pg_setup"]
