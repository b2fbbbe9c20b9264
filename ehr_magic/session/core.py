"""``Session``: the one answering path behind the magic, the side panel, ``ehr-magic ask``,
``ehr-magic chat`` and ``ehr-magic eval`` (its agent and memory modes).

A session owns the ``ehr``, the model client, memory and reuse, the privacy level, the
run mode, the conversation, and in a notebook everything after an answer (``session.cells``,
a ``NotebookCells``): the cell it offers, the cells waiting to be accepted or rejected, and
the history of the kernel's questions. ``Session.ask(question)`` tries its ``strategies``
(``ehr_magic.session.strategies``) in order, and the first that answers wins:

1. an accepted cell for exactly this question: run it as it is (no model call);
2. reuse with substitution (``ehr_magic.reuse``): a remembered cell of the same kind
   of question, its code adapted to the new values (no model call);
3. the agent, with the closest memory entries as its examples and the conversation
   (earlier turns, the notebook variables the question refers to) in its prompt.

``mode`` selects the strategies: ``auto`` (all three), ``agent`` (3 only) or ``memory``
(1 and 2, then an abstention: never a model call). A question reuse finds certainly unanswerable is
abstained on at step 2. Whether a question continues the conversation is decided by the
model, which sees the earlier turns and restates the question as a standalone one (what
memory stores). A question worded like a follow-up, asked after another, only skips reuse;
no question is ever refused for its wording.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from ehr_magic import skills
from ehr_magic.errors import DatabaseError
from ehr_magic.agent import AgentSettings, Event
from ehr_magic.agent.turns import DEFAULT_HISTORY_TOKENS, found_text
from ehr_magic.runtime.executor import code_namespace
from ehr_magic.safety import privacy
from ehr_magic.session import variables as notebook
from ehr_magic.session.answer import Answer
from ehr_magic.session.cells import HistoryItem, NotebookCells
from ehr_magic.session.conversation import Conversation, Turn, answer_shape, describe_answer, looks_like_follow_up
from ehr_magic.session.strategies import STRATEGIES, AskContext, Strategy

if TYPE_CHECKING:  # imported where used, so that connecting needs neither a model client nor reuse
    from ehr_magic.db import EHR
    from ehr_magic.knowledge.store import EditFile
    from ehr_magic.knowledge.view import KnowledgeView
    from ehr_magic.llm import LLMClient
    from ehr_magic.memory import MemoryEntry
    from ehr_magic.reuse import Reuser

Mode = Literal["auto", "agent", "memory"]
MODES: tuple[str, ...] = ("auto", "agent", "memory")


class Session:
    """Answers questions on one ``EHR`` with a memory store, (lazily) a model and a conversation."""

    def __init__(self, ehr: EHR | None = None, *, memory: Any = None, llm: Any = None,
                 llm_overrides: dict[str, Any] | None = None, settings: AgentSettings | None = None,
                 store_auto: bool = False, mode: Mode = "auto",
                 history_tokens: int = DEFAULT_HISTORY_TOKENS, keep_conversation: bool = True,
                 reuser: Any = None) -> None:
        self.mode = mode  # sets ``strategies``, the ways to answer tried in order
        # The class, not the Database face: the session closes and reopens it and drafts its knowledge.
        # Held as Any, not EHR | None: None until ``connect``, and the strategies, the magic and the panel
        # read it only once a database is open, which mypy cannot follow.
        self.ehr: EHR | None = ehr
        self.memory = memory
        self.llm_overrides = dict(llm_overrides or {})  # e.g. %config EhrMagics.model
        self.settings = settings or AgentSettings()
        self.store_auto = store_auto
        self.history_tokens = history_tokens  # the token budget of earlier turns in the prompt
        self.keep_conversation = keep_conversation  # False: every question stands alone (eval)
        self.conversation = Conversation()
        self._fixed_llm = llm  # a client given by the caller is used as it is, never closed here
        self._llm: LLMClient | None = None
        self._llm_key: tuple | None = None
        self._reuser = reuser
        self.description = ""  # one line about the connected database (``connect``)
        self.cells = NotebookCells(self)  # offered, accepted and rejected cells; the kernel's history

    @property
    def mode(self) -> Mode:
        """``auto`` (memory, then the agent), ``agent`` (the agent only) or ``memory`` (never a model call)."""
        return self._mode

    @mode.setter
    def mode(self, mode: Mode) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self._mode: Mode = mode
        self.strategies: list[Strategy] = list(STRATEGIES[mode])

    # -- database and memory -------------------------------------------------------------

    def connect(self, target: str, *, patients: int = 100, progress: Any = None,
                say: Callable[[str], None] = print) -> str:
        """Connect to ``demo``, ``synthetic``, a database file or a server URL; returns one line
        saying what is connected. ``say`` shows what the demo had to do on the way (a download,
        a fallback). A new database starts a new conversation."""
        from ehr_magic.db import connect as open_database
        from ehr_magic.sources.demo import resolve_database

        path, what = resolve_database(target, patients=patients, progress=progress, say=say)
        ehr = open_database(path, progress=progress)  # a file path or a server URL; ~ is expanded
        if self.ehr is not None:
            self.ehr.close()
        self.ehr, self._reuser = ehr, None
        self.conversation = Conversation()
        self.description = "\n".join([f"ehr = {what or ehr.dataset}: {len(ehr.tables())} tables, schema {ehr.schema}, "
                                       f"{ehr.clock_text}", *ehr.connect_notes()])
        return self.description

    @property
    def database(self) -> EHR:
        """The open database; a ``DatabaseError`` that says what to do when none is open."""
        if self.ehr is None:
            raise DatabaseError("No database is open: connect one first (%ehr connect PATH in a notebook, "
                                "--db PATH in a shell).")
        return self.ehr

    def use_memory(self, path: str | None) -> None:
        """Use the memory store at ``path`` (default: ``EHR_MAGIC_MEMORY`` or the user data folder)."""
        from ehr_magic.memory import MemoryStore

        store = MemoryStore(path or None)
        if self.memory is not None and hasattr(self.memory, "close"):
            self.memory.close()
        self.memory, self._reuser = store, None

    # -- answering ---------------------------------------------------------------------

    def ask(self, question: str, *, variables: Mapping[str, Any] | None = None, regenerate: bool = False,
            execute: bool = True, model: str | None = None, settings: AgentSettings | None = None,
            on_event: Callable[[Event], None] | None = None) -> Answer:
        """Answer ``question`` in this conversation. ``variables`` are the notebook's user
        variables (name -> value); those the question refers to are described to the model
        at the privacy level, and generated code may use any of them."""
        started = time.perf_counter()
        question = " ".join(question.split())
        variables = dict(variables or {})
        agent_settings = replace(settings or self.settings, execute=execute)
        level = self.privacy_level(agent_settings) or privacy.default_level(self.ehr)
        present, missing = notebook.referenced(question, variables)
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", question))
        missing += [name for name in dict.fromkeys(self._earlier_variables())
                    if name not in variables and name not in missing and name in words]
        follow_up = bool(self.conversation.turns) and looks_like_follow_up(question)
        refusal = self._refusal(question, missing)
        if refusal is not None:
            refusal.seconds = time.perf_counter() - started
            return refusal
        context = AskContext(session=self, variables=variables, present=present, settings=agent_settings,
                             level=level, follow_up=follow_up, regenerate=regenerate, model=model, on_event=on_event)
        for strategy in self.strategies:
            answer = strategy.answer(question, context)
            if answer is not None:
                return self._finish(answer, started, level)
        # each mode's list ends with one that always does
        raise AssertionError(f"no strategy answered in {self.mode} mode")

    def ask_in_notebook(self, question: str, **options: Any) -> Answer:
        """``ask``, then the step after the answer that every notebook front end shares: the
        kernel's history, and the cell offered for the answer (``answer.offered``). An
        interruption or an error is recorded in the history, then raised."""
        started = time.perf_counter()
        try:
            answer = self.ask(question, **options)
        except BaseException as exc:
            status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "error"
            self.cells.history.append(HistoryItem(question, status, "agent", time.perf_counter() - started))
            raise
        answer.offered = self.cells.offer(answer)
        return answer

    def _refusal(self, question: str, missing: list[str]) -> Answer | None:
        """A clear sentence instead of a model call, for questions that cannot be read."""
        if missing:
            names = ", ".join(f"`{name}`" for name in missing)
            return Answer(question=question, status="clarify", source="session", message=(
                f"There is no variable {names} in the notebook (any more): run the cell that defines it, "
                "or ask without it."))
        # Wording alone never refuses: "patients of the same age" or "and then" start many first
        # questions. With no earlier turn the question stands alone, and the model can still ask.
        return None

    def _finish(self, answer: Answer, started: float, level: str) -> Answer:
        answer.seconds = time.perf_counter() - started
        if self.keep_conversation:
            answered = answer.status == "answered"
            # a failure's message may quote printed values: the model sees it masked, as in the loop's feedback
            described = describe_answer(answer.answer, level) if answered else \
                privacy.mask_feedback(answer.message, level, self.ehr, code=answer.code, strict=True)
            if answered and answer.source == "agent" and answer.message:  # "None found: the code searched ..."
                described += f" ({privacy.mask_feedback(answer.message, level, self.ehr, code=answer.code)})"
            result = answer.result
            found = found_text(result.linked, [(s.code, s.shown) for s in result.steps if s.observation]) \
                if result is not None else ""
            self.conversation.add(Turn(answer.question, answer.standalone_question, answer.status,
                                       answer.code, described, answer.source, answer.seconds, list(answer.variables),
                                       answer_shape(answer.answer) if answered else "no result", found))
        return answer

    def _earlier_variables(self) -> list[str]:
        return [name for turn in self.conversation.turns for name in turn.variables]

    def new_conversation(self) -> None:
        """Forget the earlier turns: the next question stands alone."""
        self.conversation = Conversation()

    def privacy_level(self, settings: AgentSettings | None = None) -> str | None:
        """What the model may see: the setting when there is one, else the connected database's
        default (``ehr_magic.safety.privacy.default_level``); None with neither."""
        level = (settings or self.settings).privacy
        if level:
            return privacy.check_level(level)
        return privacy.default_level(self.ehr) if self.ehr is not None else None

    # -- memory and reuse ----------------------------------------------------------------

    def code_names(self) -> set[str]:
        """The names every cell's code finds without defining them (``ehr``, ``pl``, ``skills``...)."""
        return set(code_namespace(self.database)[0]) | set(self.tools())

    def remembered(self, text: str = "", limit: int = 50) -> list[MemoryEntry]:
        """This dataset's memory entries, of every origin (each can be a few-shot example; accepted
        and imported ones are also answered from): newest first, or with ``text`` the closest to it
        first. What every front end lists, with each entry's origin."""
        if self.memory is None:
            return []
        schema = self.database.schema
        if text.strip():
            return self.memory.search(text, k=limit, schema=schema)
        return self.memory.list(schema=schema, limit=limit)

    def tools(self) -> dict[str, Any]:
        """Names generated and remembered code may use besides ``ehr``: the clinical ``skills``."""
        return skills.namespace(self.database)

    def reuser(self) -> Reuser:
        """The reuse engine over this session's memory (built on first use)."""
        if self._reuser is None:
            from ehr_magic.reuse import Reuser

            self._reuser = Reuser.from_store(self.database, self.memory, timeout=self.settings.timeout)
        return self._reuser

    # -- knowledge ---------------------------------------------------------------------

    def knowledge_view(self) -> KnowledgeView:
        """What the model is told about the tables and the clock, each statement marked
        drafted or confirmed (``ehr_magic.knowledge.view.KnowledgeView``)."""
        from ehr_magic.knowledge.view import knowledge_view

        return knowledge_view(self.database)

    def edit_knowledge(self, path: str | None = None, folder: str = ".") -> EditFile:
        """Write the knowledge to a file to edit (default ``<schema>.knowledge.yaml`` in
        ``folder``); an existing file with other text is kept (``EditFile.written``)."""
        from ehr_magic.db.knowledge_io import knowledge_or_template
        from ehr_magic.knowledge import store as knowledge_store

        ehr = self.database
        return knowledge_store.write_for_edit(ehr, path or knowledge_store.default_edit_path(ehr, folder),
                                              knowledge_or_template(ehr))

    def import_knowledge(self, path: str | None = None) -> str:
        """Check the knowledge file ``path`` (default: the file ``edit_knowledge`` writes) against
        the database, store it, and reconnect so the next question uses it; returns one sentence
        saying what changed. Raises
        ``KnowledgeRefused`` (every problem, nothing stored) when the file does not fit."""
        from ehr_magic.db import connect
        from ehr_magic.db.knowledge_io import store_prepared
        from ehr_magic.knowledge import store as knowledge_store

        ehr = self.database
        prepared = knowledge_store.prepare_import(ehr, path or knowledge_store.default_edit_path(ehr))
        target, attachment = ehr.path, getattr(ehr, "attachment", None)
        ehr.close()  # DuckDB lets one process open a file read-only or writable, not both
        try:
            store_prepared(target, prepared, attachment)
        finally:
            self.ehr = connect(target)
            self._reuser = None  # it holds the old connection
        view = self.knowledge_view()
        counts = view.counts()
        clock = f"; the clock is now {view.clock.now}" if prepared.now is not None else ""
        return (f"Imported {prepared.path}: {len(prepared.knowledge.tables)} tables described, "
                f"{counts['confirmed']} statements written or confirmed by a person, {counts['drafted']} drafted"
                f"{clock}. The next question uses it.")

    # -- model -------------------------------------------------------------------------

    def llm(self, model: str | None = None) -> LLMClient:
        """The LLM client for the current settings (re-created when they change).

        Raises ``ConfigError`` naming what to set when no model is configured.
        """
        if self._fixed_llm is not None:
            return self._fixed_llm
        from ehr_magic.llm import LLMClient, resolve_settings

        overrides = {k: v for k, v in self.llm_overrides.items() if v not in (None, "")}
        settings = resolve_settings(overrides=overrides, model=model)
        key = (settings.provider, settings.model, settings.endpoint, settings.api_key, settings.temperature,
               settings.timeout, settings.stream)
        if self._llm is None or key != self._llm_key:
            if self._llm is not None:
                self._llm.close()
            self._llm, self._llm_key = LLMClient(settings), key
        return self._llm

    def close(self) -> None:
        """Close the model client this session made (not one it was given)."""
        if self._llm is not None:
            self._llm.close()
            self._llm = None
