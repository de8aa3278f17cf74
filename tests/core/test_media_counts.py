"""Documents and audio are counted by what they hold (R57): an inline PDF by
its pages (in every format: Anthropic ``document``, OpenAI ``file``,
LangChain v1 ``file``; page objects in compressed object streams too), audio
by the duration its container states, an Anthropic ``document`` of content
blocks by their text. A request over T because of them is made to fit
(answered media go to files), one under T goes out as it is. Through
:class:`Compressor`, sync and async."""

from __future__ import annotations

import base64
import io
import wave
import zlib

import pytest

from ars_core import ApproxEstimator, Compressor, ContentPart, Message
from ars_core.estimate import message_tokens

from .helpers import assistant, files_in, memory_backend, small_config, user, words
from .test_l1_media import run

EST = ApproxEstimator()
MODES = pytest.mark.parametrize("mode", ["sync", "async"])
#: what a page costs (text and the page's image), as the estimator charges it
PAGE = 3000


def pdf(pages: int, *, compressed: bool = False) -> bytes:
    """A valid PDF of ``pages`` pages, each saying its number; ``compressed``
    puts the page objects in a zlib-compressed object stream (PDF 1.5)."""
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(b"%d 0 R" % (3 + 2 * i) for i in range(pages))
        + b"] /Count %d >>" % pages,
    ]
    page_objects: list[bytes] = []
    for i in range(pages):
        page_objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R >>"
            % (4 + 2 * i)
        )
        text = b"BT /F1 12 Tf 72 720 Td (page %d) Tj ET" % (i + 1)
        page_objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(text), text))
    if compressed:
        # the page dictionaries go into one object stream; the content streams stay
        inner = b"\n".join(page_objects[0::2])
        body = zlib.compress(inner)
        objects += [b"<< /Length 0 >>\nstream\n\nendstream" for _ in range(2 * pages)]
        objects.append(
            b"<< /Type /ObjStm /N %d /First 0 /Filter /FlateDecode /Length %d >>\nstream\n%s\nendstream"
            % (pages, len(body), body)
        )
    else:
        objects += page_objects
    out = io.BytesIO()
    out.write(b"%PDF-1.5\n")
    offsets = []
    for n, body_ in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (n, body_))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.writelines(b"%010d 00000 n \n" % o for o in offsets)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def pdf_part(form: str, data: bytes) -> ContentPart:
    payload = base64.b64encode(data).decode("ascii")
    if form == "anthropic":
        source = {"type": "base64", "media_type": "application/pdf", "data": payload}
        return ContentPart(type="document", data={"type": "document", "source": source})
    if form == "openai":
        file = {"filename": "contract.pdf", "file_data": f"data:application/pdf;base64,{payload}"}
        return ContentPart(type="file", data={"type": "file", "file": file})
    return ContentPart(
        type="file", data={"type": "file", "base64": payload, "mime_type": "application/pdf"}
    )


def wav(seconds: float, rate: int = 2000) -> bytes:
    """A mono 8-bit WAV of silence lasting ``seconds``."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(1)
        w.setframerate(rate)
        w.writeframes(b"\x80" * int(seconds * rate))
    return out.getvalue()


def audio_part(form: str, data: bytes) -> ContentPart:
    payload = base64.b64encode(data).decode("ascii")
    if form == "openai":
        block = {"type": "input_audio", "input_audio": {"data": payload, "format": "wav"}}
        return ContentPart(type="input_audio", data=block)
    return ContentPart(
        type="audio", data={"type": "audio", "base64": payload, "mime_type": "audio/wav"}
    )


def asked(part: ContentPart, question: str = "what does this say?") -> list[Message]:
    """The media in an answered user turn, then a new question."""
    turn = Message(role="user", content=(ContentPart(type="text", text=question), part), id="u-m")
    return [turn, assistant("it says several things " + words(20)), user("and the penalties?")]


@pytest.mark.spec("R57", "R12")
class TestDocumentsByPages:
    @pytest.mark.parametrize("form", ["anthropic", "openai", "langchain_v1"])
    @pytest.mark.parametrize("compressed", [False, True])
    def test_a_pdf_costs_its_pages(self, form: str, compressed: bool) -> None:
        """1 page and 200 pages differ by 199 pages' tokens, in every format."""
        one = message_tokens(EST, asked(pdf_part(form, pdf(1, compressed=compressed)))[0])
        many = message_tokens(EST, asked(pdf_part(form, pdf(200, compressed=compressed)))[0])
        assert many - one == 199 * PAGE and PAGE <= one < PAGE + 100

    @MODES
    @pytest.mark.parametrize("form", ["anthropic", "openai", "langchain_v1"])
    def test_a_200_page_pdf_is_offloaded_and_a_1_page_one_is_sent(
        self, mode: str, form: str
    ) -> None:
        """T = 16K: the 1-page contract's request (about 3K tokens) goes out as it
        is; the 200-page one (about 600K) would never fit: once answered it goes
        to ``outputs/media/`` and the request fits T."""
        config = small_config(summary_threshold=16)
        small = asked(pdf_part(form, pdf(1)))
        out = run(mode, Compressor(config, estimator=EST, backend=memory_backend()), small)
        assert out.level is None and list(out.view) == small

        large = asked(pdf_part(form, pdf(200)))
        backend = memory_backend()
        out = run(mode, Compressor(config, estimator=EST, backend=backend), large)
        assert out.tokens_before > 200 * PAGE
        assert out.level == "L1" and out.tokens_after <= 16 * 1024
        (path,) = files_in(backend)
        assert path.startswith("outputs/media/") and path.endswith(".pdf.b64")
        note = out.view[0].content[1].text or ""
        assert note.startswith("[ARS: inline ") and path in note


@pytest.mark.spec("R57", "R12")
class TestAudioByDuration:
    @pytest.mark.parametrize("form", ["openai", "langchain_v1"])
    def test_audio_costs_its_duration(self, form: str) -> None:
        """10 tokens a second: a 1 s clip and a 30 min clip."""
        short = message_tokens(EST, asked(audio_part(form, wav(1)))[0])
        long = message_tokens(EST, asked(audio_part(form, wav(1800)))[0])
        assert long - short == 1799 * 10 and 10 <= short < 100

    @MODES
    def test_a_30_minute_clip_over_t_is_offloaded(self, mode: str) -> None:
        """T = 16K: the 30 min clip (18K tokens) answered goes to a file."""
        state = asked(audio_part("openai", wav(1800)), "transcribe this call")
        backend = memory_backend()
        config = small_config(summary_threshold=16)
        out = run(mode, Compressor(config, estimator=EST, backend=backend), state)
        assert out.tokens_before > 18_000 and out.level == "L1"
        assert out.tokens_after <= 16 * 1024
        assert [p.split("/")[1] for p in files_in(backend)] == ["media"]


@pytest.mark.spec("R57")
class TestTextDocuments:
    @MODES
    def test_a_document_of_content_blocks_costs_its_text(self, mode: str) -> None:
        """An Anthropic ``document`` whose ``content`` source holds about 10K
        tokens of text: counted as that text, so at T = 8K the request is
        summarized instead of sent over T."""
        chapters = [words(2500, f"chapter{i}") for i in range(4)]
        source = {"type": "content", "content": [{"type": "text", "text": c} for c in chapters]}
        block = {"type": "document", "source": source, "title": "handbook"}
        state = asked(ContentPart(type="document", data=block), "summarize the handbook")
        text_tokens = sum(EST.count_text(c) for c in chapters)
        assert text_tokens > 9_000
        assert message_tokens(EST, state[0]) >= text_tokens
        config = small_config(summary_threshold=8, summary_keep_messages=1)
        out = run(mode, Compressor(config, estimator=EST, backend=memory_backend()), state)
        assert out.tokens_before >= text_tokens and out.level == "L2"
        assert out.tokens_after <= 8 * 1024
