"""The kernel end of the side panel: one ``PanelHandler`` per open comm.

``handle(data)`` serves one request of protocol v2 or v1 (``protocol.py``) and sends its
events and its one reply through ``send``. It never raises: malformed or unknown
requests, user problems (no model configured, a failed model call) and our own bugs
all become ``error`` replies, so nothing the panel sends can break the kernel. The
handler is a thin front end over the same calls as ``%%ehr``: the ``Session`` (its
answers, the cells it offers, its memory store and knowledge).
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Callable
from typing import Any

from ehr_magic.panel import protocol as p

log = logging.getLogger("ehr_magic.panel")

Send = Callable[[dict[str, Any]], None]

TOKEN_FLUSH_SECONDS = 0.1
SEARCH_LIMIT = 50
STEP_TEXT_CHARS = 4000


class PanelHandler:
    """Serves the panel's requests for one ``EhrMagics`` instance."""

    def __init__(self, magics: Any, send: Send) -> None:
        """``magics``: the ``EhrMagics``, or a function returning the current one (so a
        panel keeps working after ``%reload_ext ehr_magic``)."""
        self._magics = magics
        self._send_raw = send
        self._routes: dict[str, Callable[[p.Request], dict[str, Any]]] = {
            "hello": self._hello, "status": self._status, "ask": self._ask,
            "memory.search": self._memory_search, "memory.get": self._memory_get,
            "memory.delete": self._memory_delete, "accept": self._accept, "reject": self._reject,
            "pending": self._pending, "conversation": self._conversation,
            "conversation.new": self._new_conversation,
            "knowledge": self._knowledge, "knowledge.edit": self._knowledge_edit,
            "knowledge.import": self._knowledge_import,
        }
        self._version = p.VERSION  # of the request being served: its replies speak it
        assert set(self._routes) == set(p.REQUEST_TYPES)

    @property
    def magics(self) -> Any:
        return self._magics() if callable(self._magics) else self._magics

    # -- entry point ---------------------------------------------------------------------

    def handle(self, data: Any) -> None:
        """Serve one request; every outcome is a message, never an exception."""
        from ehr_magic.errors import EhrMagicError, sentences
        from ehr_magic.memory import EntryNotFoundError

        rid = p.request_id(data)
        self._version = p.VERSION
        try:
            request = p.parse_request(data)
            self._version = request.v
            body = self._routes[request.type](request)
            self.send(p.result(request.id, request.type, body))
        except p.ProtocolError as exc:
            self.send(p.error(rid, exc.code, exc.message, exc.detail))
        except EntryNotFoundError as exc:
            self.send(p.error(rid, p.NOT_FOUND, str(exc)))
        except EhrMagicError as exc:
            self.send(p.error(rid, p.USER_ERROR, str(exc)))
        except KeyboardInterrupt:
            self.send(p.error(rid, p.INTERRUPTED, "Interrupted; nothing was stored."))
        except Exception as exc:  # boundary: our bug is reported with its traceback, and the kernel survives
            log.exception("ehr-magic panel request failed")
            self.send(p.error(rid, p.INTERNAL,
                              f"ehr-magic failed, which is a bug: {type(exc).__name__}: {sentences(exc)}",
                              traceback.format_exc()))

    def send(self, message: dict[str, Any]) -> None:
        """Send one message; a value JSON cannot carry becomes an ``internal`` error."""
        if "id" in message:  # a reply or event speaks the version of its request
            message = {**message, "v": self._version}
        try:
            json.dumps(message, allow_nan=False)
        except (TypeError, ValueError) as exc:
            log.error("ehr-magic panel: reply is not JSON: %s", exc)
            message = p.error(message.get("id"), p.INTERNAL, f"ehr-magic built a reply JSON cannot carry: {exc}")
        try:
            self._send_raw(message)
        except Exception:  # boundary: a closed comm must not break the kernel (logged with its traceback)
            log.exception("ehr-magic panel: cannot send to the panel")

    # -- requests ------------------------------------------------------------------------

    def _hello(self, request: p.Request) -> dict[str, Any]:
        from ehr_magic.version import __version__

        return p.hello(__version__)

    def _status(self, request: p.Request) -> dict[str, Any]:
        m, s = self.magics, self.magics.session
        ehr = s.ehr
        database = None
        if ehr is not None:
            database = {"path": ehr.location, "dataset": ehr.dataset, "schema": ehr.schema,
                        "description": s.description, "tables": len(ehr.tables()),
                        # The panel shows the first 16 characters; a database without dates has no now.
                        "now": ehr.clock.now.strftime("%Y-%m-%d %H:%M:%S") if ehr.clock else
                        "offset time" if ehr.time_model == "offset" else "no clock",
                        "time_model": ehr.time_model}
        return {
            "database": database,
            "database_hint": None if ehr else ("No database connected: run %ehr connect PATH|demo|synthetic "
                                               "in the notebook."),
            "model": self._model_status(),
            "memory": self._memory_status(),
            "privacy": s.privacy_level(),
            "settings": {"steps": m.steps, "shots": m.shots, "knowledge": m.knowledge, "timeout": m.timeout,
                         "store": m.store},
            "pending": len(s.cells.pending),
        }

    def _model_status(self) -> dict[str, Any]:
        from ehr_magic.errors import EhrMagicError
        from ehr_magic.llm import resolve_settings

        try:
            settings = resolve_settings(overrides={"model": self.magics.model, "base_url": self.magics.base_url})
        except EhrMagicError as exc:
            return {"configured": False, "error": str(exc)}
        return {"configured": True, "name": settings.model, "endpoint": settings.endpoint,
                "provider": settings.provider}

    def _memory_status(self) -> dict[str, Any] | None:
        s = self.magics.session
        if s.memory is None:
            return None
        stats = s.memory.stats()
        schema = s.ehr.schema if s.ehr is not None else None
        accepted = len(s.memory.list(schema=schema, origin="accepted")) if schema else 0
        return {"path": stats.path, "total": stats.total, "schema": stats.by_schema.get(schema, 0) if schema else 0,
                "accepted": accepted}

    def _ask(self, request: p.Request) -> dict[str, Any]:
        from ehr_magic.safety.privacy import preview

        question = p.text_param(request.params, "question")
        regenerate = p.bool_param(request.params, "regenerate")
        session = self._ready()
        stream = EventStream(request.id, self.send)
        try:  # the session's settings: the notebook's (%ehr config), privacy and review included
            answer = session.ask_in_notebook(question, variables=self.magics.user_variables(), regenerate=regenerate,
                                             on_event=stream.on_event)
        finally:
            stream.flush()
        result = answer.result
        answered = answer.status == "answered"
        return {
            "question": question, "status": answer.status, "source": answer.source, "message": answer.message,
            "answer": p.answer_preview(answer.answer) if answered else {"kind": "none"},
            "answer_text": preview(answer.answer, p.TEXT_CHARS) if answered else "",
            "code": answer.offered.cell, "raw_code": answer.code, "token": answer.offered.token,
            "insert": answer.offered.insert, "knowledge": answer.knowledge, "entry_id": answer.entry_id,
            "substitutions": [[new, old] for new, old in answer.substitutions],
            "steps": [step_dict(s) for s in result.steps] if result else [],
            "examples": stream.example_list or self._examples(result.examples if result else []),
            "model": result.model if result else "", "llm_calls": len(result.llm_calls) if result else 0,
            "prompt_tokens": result.prompt_tokens if result else 0,
            "completion_tokens": result.completion_tokens if result else 0,
            "seconds": round(answer.seconds, 3),
            "standalone_question": answer.standalone_question,
            "conversation": p.conversation(session.conversation.turns)["turns"],
        }

    def _conversation(self, request: p.Request) -> dict[str, Any]:
        session = self._ready()
        return p.conversation(session.conversation.turns)

    def _new_conversation(self, request: p.Request) -> dict[str, Any]:
        session = self._ready()
        session.new_conversation()
        return p.conversation([])

    def _examples(self, ids: list[str]) -> list[dict[str, Any]]:
        """``memory:12`` / ``seed:schema:3`` ids -> {id, question, origin}."""
        from ehr_magic.errors import EhrMagicError
        from ehr_magic.memory.fewshot import seed_examples

        out = []
        for ident in ids:
            kind, _, rest = str(ident).partition(":")
            question, origin = "", kind
            try:
                if kind == "memory":
                    entry = self.magics.session.memory.get(int(rest))
                    question, origin = entry.question, entry.origin
                elif kind == "seed":
                    schema, _, number = rest.rpartition(":")
                    question = seed_examples(schema)[int(number) - 1].question
            except (EhrMagicError, ValueError, IndexError):  # a deleted entry or a stale id still shows its id
                pass
            out.append({"id": str(ident), "question": question, "origin": origin})
        return out

    def _memory_search(self, request: p.Request) -> dict[str, Any]:
        text = p.text_param(request.params, "text", required=False, allow_empty=True)
        limit = p.int_param(request.params, "limit", default=SEARCH_LIMIT, low=1, high=500)
        session = self._ready()
        entries = session.remembered(text, limit)
        return {"text": text, "schema": session.database.schema, "entries": [entry_dict(e) for e in entries]}

    def _memory_get(self, request: p.Request) -> dict[str, Any]:
        entry_id = p.int_param(request.params, "id", low=1)
        session = self._ready()
        entry = session.memory.get(entry_id)
        offered = session.cells.offer_entry(entry)
        return {"entry": entry_dict(entry), "token": offered.token, "code": offered.cell}

    def _memory_delete(self, request: p.Request) -> dict[str, Any]:
        entry_id = p.int_param(request.params, "id", low=1)
        session = self._ready()
        session.memory.get(entry_id)  # NOT_FOUND when there is no such entry
        session.memory.delete(entry_id)
        return {"id": entry_id, "deleted": True}

    def _accept(self, request: p.Request) -> dict[str, Any]:
        token = p.token_param(request.params)
        session = self._ready()
        cell = self._pending_cell(token)
        cell.rejected = False  # an explicit accept overrides an earlier reject
        entry_id = session.cells.accept(token, cell.question, cell.code)
        return {"token": token, "entry_id": entry_id, "accepted": entry_id is not None}

    def _reject(self, request: p.Request) -> dict[str, Any]:
        token = p.token_param(request.params)
        self._pending_cell(token)
        self.magics.session.cells.reject(token)
        return {"token": token, "rejected": True}

    def _pending(self, request: p.Request) -> dict[str, Any]:
        """Where an inserted cell stands: in memory as an accepted entry, rejected, or waiting."""
        from ehr_magic.memory import EntryNotFoundError

        token = p.token_param(request.params)
        cell = self._pending_cell(token)
        entry = None
        memory = self.magics.session.memory
        if cell.entry_id is not None and memory is not None:
            try:
                entry = memory.get(cell.entry_id)
            except EntryNotFoundError:
                entry = None
        return {"token": token, "question": cell.question, "rejected": cell.rejected,
                "entry_id": entry.id if entry else None, "origin": entry.origin if entry else None,
                "accepted": bool(entry and entry.origin == "accepted")}

    def _knowledge(self, request: p.Request) -> dict[str, Any]:
        session = self._ready()
        return {"knowledge": session.knowledge_view().to_dict()}

    def _knowledge_edit(self, request: p.Request) -> dict[str, Any]:
        path = p.text_param(request.params, "path", required=False, max_len=p.MAX_PATH)
        session = self._ready()
        edited = session.edit_knowledge(path or None)
        return {"path": str(edited.path.resolve()), "name": p.relative_path(edited.path), "written": edited.written,
                "message": edited.message("press Import in the Data tab.")}

    def _knowledge_import(self, request: p.Request) -> dict[str, Any]:
        from ehr_magic.knowledge.store import KnowledgeRefused

        path = p.text_param(request.params, "path", required=False, max_len=p.MAX_PATH)
        session = self._ready()
        try:
            message = self.magics.import_knowledge(path or None)
        except KnowledgeRefused as exc:  # shown in the Data tab, one line per problem
            return {"imported": False, "problems": exc.problems, "message": str(exc.args[0])}
        return {"imported": True, "problems": [], "message": message,
                "knowledge": session.knowledge_view().to_dict()}

    # -- helpers -------------------------------------------------------------------------

    def _ready(self) -> Any:
        from ehr_magic.errors import EhrMagicError

        try:
            return self.magics._ready()
        except EhrMagicError as exc:
            raise p.ProtocolError(p.NOT_READY, f"{exc} Use %ehr connect PATH|demo|synthetic in the notebook.") from None

    def _pending_cell(self, token: str) -> Any:
        cell = self.magics.session.cells.pending.get(token)
        if cell is None:
            raise p.ProtocolError(p.NOT_FOUND, f"No inserted cell has the marker #{token} in this kernel session "
                                               "(the kernel may have restarted); ask again.")
        return cell


class EventStream:
    """Agent events -> ``event`` messages; streamed tokens are batched (~10 per second)."""

    def __init__(self, rid: str, send: Send, clock: Callable[[], float] = time.monotonic) -> None:
        self.rid, self._send, self._clock = rid, send, clock
        self._tokens: list[str] = []
        self._last = 0.0
        self._elapsed = 0.0
        self.example_list: list[dict[str, Any]] = []

    def on_event(self, event: Any) -> None:
        self._elapsed = event.elapsed
        if event.kind == "token":
            self._tokens.append(event.detail)
            if self._clock() - self._last >= TOKEN_FLUSH_SECONDS:
                self.flush()
            return
        self.flush()
        if event.kind == "phase":
            self._emit({"kind": "phase", "phase": event.phase, "detail": event.detail})
        elif event.kind == "context":  # the few-shot examples the agent put in its prompt
            self.examples(event.examples)
        elif event.kind == "step" and event.step is not None:
            self._emit({"kind": "step", "step": step_dict(event.step)})

    def examples(self, chosen: list[Any]) -> None:
        self.example_list = [{"id": e.id, "question": e.question,
                              "origin": "seed" if str(e.id).startswith("seed:") else "memory"} for e in chosen]
        self._emit({"kind": "examples", "examples": self.example_list})

    def flush(self) -> None:
        if self._tokens:
            text, self._tokens = "".join(self._tokens), []
            self._emit({"kind": "token", "text": text})

    def _emit(self, body: dict[str, Any]) -> None:
        self._last = self._clock()
        body["elapsed"] = round(self._elapsed, 3)
        self._send(p.event(self.rid, body))


def step_dict(step: Any) -> dict[str, Any]:
    data = step.to_dict()
    data["succeeded"] = step.succeeded
    for key in ("stdout", "answer_preview", "knowledge", "code"):
        if isinstance(data.get(key), str) and len(data[key]) > STEP_TEXT_CHARS:
            data[key] = data[key][:STEP_TEXT_CHARS] + " ..."
    return data


def entry_dict(entry: Any) -> dict[str, Any]:
    return {"id": entry.id, "question": entry.question, "code": entry.code, "knowledge": entry.knowledge,
            "origin": entry.origin, "schema": entry.schema, "dataset": entry.dataset, "model": entry.model,
            "answer_preview": (entry.answer_preview or "")[:p.TEXT_CHARS], "use_count": entry.use_count,
            "created_at": entry.created_at, "updated_at": entry.updated_at, "edited": entry.edited,
            "score": None if entry.score is None else round(float(entry.score), 2)}
