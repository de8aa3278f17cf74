"""ARS core in a plain agent loop, no framework, no API key.

Needs only the core: ``pip install ars`` (from a clone: ``pip install -e .``).

Replays a recorded agent run (shipped with the package) call by call: at each
assistant turn the history so far goes through `Compressor.call`, the recorded
reply stands in for the model, and the compression events are printed. The
event ARS persists is kept in a dict, as your runtime would keep it.

    python examples/core_quickstart.py [RUN.jsonl.gz] [--threshold K]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from ars_core import (
    CompressionEvent,
    Compressor,
    ExtractiveSummarizer,
    FsspecBackend,
    Message,
    SummarizationEvent,
    SummaryConfig,
    describe_event,
    read_messages,
)

DATA = Path(__file__).resolve().parents[1] / "ars_core" / "data"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run", nargs="?", type=Path, default=None)
    parser.add_argument(
        "--threshold", type=float, default=8, help="summary_threshold in K tokens (default 8)"
    )
    args = parser.parse_args(argv)
    run = args.run or sorted(DATA.glob("*.jsonl.gz"))[0]
    recorded = read_messages(run)
    system = recorded[0] if recorded and recorded[0].role == "system" else None
    history = recorded[1:] if system else recorded

    out_dir = Path(tempfile.mkdtemp(prefix="ars-quickstart-"))
    backend = FsspecBackend(f"file://{out_dir}").scoped("demo-thread")

    def show(event: CompressionEvent) -> None:
        print(
            "  " + describe_event(event)
        )  # e.g. "completed L2: 9,120 → 3,004 tokens (T 8,192), ..."

    engine = Compressor(
        SummaryConfig(summary_threshold=args.threshold, summary_keep_messages=6),
        backend=backend,
        summarizer=ExtractiveSummarizer(),
        emitter=show,
    )
    state: list[Message] = []
    stored_event: dict | None = None  # what a checkpointer would hold
    for message in history:
        if message.role == "assistant":
            event = SummarizationEvent.from_dict(stored_event) if stored_event else None
            out = engine.call(
                state, lambda view, reply=message: reply, event=event, system=system, thread="demo"
            )
            if out.update is not None:
                stored_event = out.update.event.to_dict() if out.update.event else stored_event
                for index, trimmed in out.update.replaced:
                    state[index] = trimmed
        state.append(message)
    print(f"\n{run.name}: {len(state)} state messages kept, none deleted")
    if stored_event:
        print(f"latest cutoff: {stored_event['cutoff']}; summary begins:")
        print("  " + stored_event["summary_message"]["content"][:300].replace("\n", "\n  "))
    files = sorted(p.relative_to(out_dir) for p in out_dir.rglob("*") if p.is_file())
    print(f"\n{len(files)} files under {out_dir}:")
    for f in files[:10]:
        print(f"  {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
