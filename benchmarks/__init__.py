"""ARS's benchmarks: one module per report section, run by ``benchmarks/run.py``.

- :mod:`benchmarks.common`: the runs, the peers' plumbing, timing and table helpers;
- :mod:`benchmarks.overhead`: A, per-call overhead and one L2 round;
- :mod:`benchmarks.tokens`: B, tokens sent over whole replayed runs;
- :mod:`benchmarks.estimators`: C, estimator accuracy and speed;
- :mod:`benchmarks.flatness`: D, the core's per-call cost against history length.

A section module has ``KEY``, ``NEEDS`` (keys measured before it),
``measure(ctx)``, ``render(ctx, data)`` (markdown lines) and ``raw(data)``
(JSON-ready numbers). Replays go through the library, :mod:`ars_core.replay`.
"""
