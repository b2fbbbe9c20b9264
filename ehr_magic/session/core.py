"""``Session``: the one answering path behind the magic, the side panel, ``ehr-magic ask``,
``ehr-magic chat`` and ``ehr-magic eval`` (its agent and memory modes).

A session owns the ``ehr``, the model client, memory and reuse, the privacy level, the
run mode, the conversation, and in a notebook everything after an answer: the cell it
offers (``ehr_magic.session.cells``), the cells waiting to be accepted or rejected, and the
history of the kernel's questions. ``Session.ask(question)`` tries, in order:

1. an accepted cell for exactly this question: run it as it is (no model call);
2. reuse with substitution (``ehr_magic.reuse``): a remembered cell of the same kind
   of question, its code adapted to the new values (no model call);
3. the agent, with the closest memory entries as its examples and the conversation
   (earlier turns, the notebook variables the question refers to) in its prompt.

``mode`` selects the steps: ``auto`` (all three), ``agent`` (3 only) or ``memory``
(1 and 2, never a model call). A question reuse finds certainly unanswerable is
abstained on at step 2. Whether a question continues the conversation is decided by the
model, which sees the earlier turns and restates the question as a standalone one (what
memory stores). A question worded like a follow-up, asked after another, only skips reuse;
no question is ever refused for its wording.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ehr_magic import skills
from ehr_magic.agent import Agent, AgentSettings, Event
from ehr_magic.agent.turns import DEFAULT_HISTORY_TOKENS, ConversationContext
from ehr_magic.runtime.executor import Executor, code_namespace, is_empty_answer
from ehr_magic.agent.steps import AgentResult
from ehr_magic.text import normalise
from ehr_magic.errors import ConfigError
from ehr_magic.safety import privacy
from ehr_magic.safety.privacy import preview
from ehr_magic.session import variables as notebook
from ehr_magic.session.cells import HistoryItem, Offered, PendingCell, cell_body, new_token, with_marker
from ehr_magic.session.conversation import Conversation, Turn, answer_shape, describe_answer, looks_like_follow_up

Source = Literal["memory", "agent", "session"]
Mode = Literal["auto", "agent", "memory"]
MODES: tuple[str, ...] = ("auto", "agent", "memory")


@dataclass
class Answer:
    """What the front ends show: the answer, its code and where it came from."""

    question: str
    status: str  # answered | clarify | abstained | failed | generated
    answer: Any = None
    code: str = ""
    knowledge: str = ""
    message: str = ""
    source: Source = "agent"
    entry_id: int | None = None  # memory entry reused
    result: AgentResult | None = None
    namespace: dict[str, Any] = field(default_factory=dict, repr=False)
    seconds: float = 0.0
    substitutions: list[tuple[str, str]] = field(default_factory=list)  # (new, old) values written into a reused cell
    standalone: str = ""  # the question the code answers on its own (a follow-up restated); "" = question
    variables: list[str] = field(default_factory=list)  # notebook variables described to the model
    offered: Offered | None = None  # the cell offered to the notebook (``Session.ask_in_notebook``)
    notes: list[str] = field(default_factory=list)  # what the analyst should know about the context used

    @property
    def model_calls(self) -> int:
        return len(self.result.llm_calls) if self.result else 0

    @property
    def standalone_question(self) -> str:
        return self.standalone or self.question


class Session:
    """Answers questions on one ``EHR`` with a memory store, (lazily) a model and a conversation."""

    def __init__(self, ehr: Any = None, *, memory: Any = None, llm: Any = None, llm_overrides: dict[str, Any] | None = None,
                 settings: AgentSettings | None = None, store_auto: bool = False, mode: Mode = "auto",
                 history_tokens: int = DEFAULT_HISTORY_TOKENS, keep_conversation: bool = True,
                 reuser: Any = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.ehr = ehr
        self.memory = memory
        self.llm_overrides = dict(llm_overrides or {})  # e.g. %config EhrMagics.model
        self.settings = settings or AgentSettings()
        self.store_auto = store_auto
        self.mode: Mode = mode
        self.history_tokens = history_tokens  # the token budget of earlier turns in the prompt
        self.keep_conversation = keep_conversation  # False: every question stands alone (eval)
        self.conversation = Conversation()
        self._fixed_llm = llm  # a client given by the caller is used as it is, never closed here
        self._llm = None
        self._llm_key: tuple | None = None
        self._reuser = reuser
        self.description = ""  # one line about the connected database (``connect``)
        self.pending: dict[str, PendingCell] = {}  # cells offered, by token
        self.history: list[HistoryItem] = []
        self.last_accepted: tuple[str, str] | None = None  # (question, code) of the last accepted cell

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
        level = self.privacy_level(agent_settings)
        present, missing = notebook.referenced(question, variables)
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", question))
        missing += [name for name in dict.fromkeys(self._earlier_variables())
                    if name not in variables and name not in missing and name in words]
        follow_up = bool(self.conversation.turns) and looks_like_follow_up(question)
        refusal = self._refusal(question, missing)
        if refusal is not None:
            refusal.seconds = time.perf_counter() - started
            return refusal
        declined = None  # why reuse with substitution did not answer
        if self.mode != "agent" and not regenerate and self.memory is not None and not follow_up:
            reused = self._reuse(question, variables)
            if reused is None and execute:
                reused, declined = self._adapt(question)
            if reused is not None:
                return self._finish(reused, started, level)
            if self.mode == "memory":
                return self._finish(Answer(question, "abstained", message=declined or "Nothing in memory answers this.",
                                           source="memory"), started, level)
        elif self.mode == "memory":
            return self._finish(Answer(question, "abstained", source="memory",
                                       message="Memory mode answers without a model, and this follow-up needs one."),
                                started, level)
        try:
            llm = self.llm(model)
        except ConfigError as exc:
            if declined is None:
                raise
            raise ConfigError(f"{exc} {declined}") from None  # what to set first, then why memory could not answer
        described = [notebook.describe(name, variables[name], level) for name in present]
        context = ConversationContext(
            turns=self.conversation.summaries() if self.keep_conversation else (),
            variables=tuple(d.text for d in described), variable_names=tuple(d.name for d in described),
            namespace=variables, budget_tokens=self.history_tokens)
        examples = self._examples()
        if follow_up and examples is not None:  # "now only the women" retrieves like the question it follows
            examples = _AlongWith(examples, self.conversation.turns[-1].standalone)
        agent = Agent(self.ehr, llm, examples=examples, settings=agent_settings, tools=self.tools(),
                      skill_cards=skills.prompt_section)
        result = agent.run(question, on_event=on_event, conversation_context=context)
        standalone = result.standalone_question if not context.empty and result.standalone_question else question
        answer = Answer(question, result.status, result.answer, result.code, result.knowledge, result.message,
                        "agent", None, result, result.namespace, standalone=standalone,
                        variables=[d.name for d in described],
                        notes=[d.note for d in described if d.note])
        if self.store_auto and result.status == "answered" and self.memory is not None:
            answer.entry_id = self.memory.add(standalone, result.code, knowledge=result.knowledge, origin="auto",
                                              schema=self.ehr.schema, dataset=self.ehr.dataset,
                                              answer_preview=preview(result.answer, 500), model=result.model)
        return self._finish(answer, started, level)

    def ask_in_notebook(self, question: str, **options: Any) -> Answer:
        """``ask``, then the step after the answer that every notebook front end shares: the
        kernel's history, and the cell offered for the answer (``answer.offered``). An
        interruption or an error is recorded in the history, then raised."""
        started = time.perf_counter()
        try:
            answer = self.ask(question, **options)
        except BaseException as exc:
            status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "error"
            self.history.append(HistoryItem(question, status, "agent", time.perf_counter() - started))
            raise
        answer.offered = self.offer(answer)
        return answer

    def offer(self, answer: Answer) -> Offered:
        """Record ``answer`` in the history and offer its code as a cell: marked, ending on a
        line that shows the answer, and waiting to be accepted. Only new code (generated, or
        a remembered cell adapted to new values) is to be inserted; an accepted cell reused as
        it is already stands in the notebook."""
        self.history.append(HistoryItem(answer.question, answer.status, answer.source, answer.seconds))
        if answer.status not in ("answered", "generated"):
            return Offered(None)
        token = new_token()
        answer.code = cell_body(answer.code)
        self.pending[token] = PendingCell(
            token, answer.standalone_question, answer.code, answer.knowledge,
            answer.result.model if answer.result else "",
            preview(answer.answer, 500) if answer.status == "answered" else "", entry_id=answer.entry_id)
        return Offered(token, with_marker(token, answer.standalone_question, answer.code),
                       insert=answer.source == "agent" or bool(answer.substitutions))

    def offer_entry(self, entry: Any) -> Offered:
        """Offer a memory entry's code as a cell (the panel's memory list)."""
        token = new_token()
        self.pending[token] = PendingCell(token, entry.question, entry.code, entry.knowledge, entry.model or "",
                                          entry.answer_preview)
        return Offered(token, with_marker(token, entry.question, entry.code))

    def accept_cell(self, token: str, question: str, code: str) -> int | None:
        """Store a marked cell that ran successfully (a rejected one never); returns the memory entry id."""
        pending = self.pending.get(token)
        if self.ehr is None or (pending is not None and pending.rejected):
            return None
        entry_id = self.accept(
            question, code.strip(),
            generated_code=pending.code.strip() if pending else None,
            knowledge=pending.knowledge if pending else "",
            answer_preview=pending.answer_preview if pending else "",
            model=pending.model if pending else None)
        if pending is not None:
            pending.entry_id = entry_id
        self.last_accepted = (question, code.strip())
        return entry_id

    def reject(self, token: str) -> None:
        """Reject an offered cell: it is never stored, and the automatic memory entry its
        answer made (``store_auto``) is deleted."""
        cell = self.pending.get(token)
        if cell is None:
            return
        cell.rejected = True
        if cell.entry_id is not None and self.memory is not None:
            if self.memory.get(cell.entry_id).origin == "auto":
                self.memory.delete(cell.entry_id)
            cell.entry_id = None

    def _refusal(self, question: str, missing: list[str]) -> Answer | None:
        """A clear sentence instead of a model call, for questions that cannot be read."""
        if missing:
            names = ", ".join(f"`{name}`" for name in missing)
            return Answer(question, "clarify", source="session", message=(
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
            self.conversation.add(Turn(answer.question, answer.standalone_question, answer.status,
                                       answer.code, described, answer.source, answer.seconds, list(answer.variables),
                                       answer_shape(answer.answer) if answered else "no result"))
        return answer

    def _earlier_variables(self) -> list[str]:
        return [name for turn in self.conversation.turns for name in turn.variables]

    def new_conversation(self) -> None:
        """Forget the earlier turns: the next question stands alone."""
        self.conversation = Conversation()

    def privacy_level(self, settings: AgentSettings | None = None) -> str:
        level = (settings or self.settings).privacy
        return privacy.check_level(level) if level else privacy.default_level(self.ehr)

    # -- memory and reuse ----------------------------------------------------------------

    def accepted_entry(self, question: str):
        """The accepted memory entry for exactly this question on this schema, if any."""
        if self.memory is None:
            return None
        wanted = normalise(question)
        for entry in self.memory.search(question, k=5, schema=self.ehr.schema, origins=["accepted", "imported"]):
            if normalise(entry.question) == wanted:
                return entry
        return None

    def _reuse(self, question: str, variables: Mapping[str, Any] | None = None) -> Answer | None:
        entry = self.accepted_entry(question)
        if entry is None:
            return None
        namespace, shared = code_namespace(self.ehr, variables, self.tools())  # a cell may use notebook variables
        execution = Executor(self.ehr, timeout=self.settings.timeout).run(entry.code, namespace)
        if not execution.ok or not execution.has_answer or is_empty_answer(execution.answer):
            return None  # the stored code no longer works here: generate anew
        self.memory.mark_used([entry.id])
        return Answer(question, "answered", execution.answer, entry.code, entry.knowledge,
                      f"reused accepted cell #{entry.id} (no model call)", "memory", entry.id,
                      namespace={k: v for k, v in namespace.items()
                                 if not k.startswith("__") and not (k in shared and shared[k] is v)})

    def code_names(self) -> set[str]:
        """The names every cell's code finds without defining them (``ehr``, ``pl``, ``skills``...)."""
        return set(code_namespace(self.ehr)[0]) | set(self.tools())

    def tools(self) -> dict[str, Any]:
        """Names generated and remembered code may use besides ``ehr``: the clinical ``skills``."""
        return skills.namespace(self.ehr)

    def reuser(self):
        """The reuse engine over this session's memory (built on first use)."""
        if self._reuser is None:
            from ehr_magic.reuse import Reuser

            self._reuser = Reuser.from_store(self.ehr, self.memory, timeout=self.settings.timeout)
        return self._reuser

    def _adapt(self, question: str) -> tuple[Answer | None, str | None]:
        """Reuse with substitution: ``(answer, None)``, or ``(None, why not)``. A question
        reuse finds unanswerable comes back as an abstained answer."""
        result = self.reuser().answer(question)
        if result.answered:
            self.memory.mark_used([result.entry_id])
            entry_knowledge = ""
            try:
                entry_knowledge = self.memory.get(result.entry_id).knowledge
            except Exception:  # noqa: BLE001 - the entry may have been deleted meanwhile
                pass
            return Answer(question, "answered", result.answer, result.code, entry_knowledge, result.message,
                          "memory", result.entry_id, namespace=result.namespace,
                          substitutions=list(result.substitutions)), None
        if result.unanswerable:
            return Answer(question, "abstained", message=f"This database cannot answer that: {result.reason}.",
                          source="memory"), None
        return None, f"Memory reuse declined: {result.reason}."

    def accept(self, question: str, code: str, *, generated_code: str | None = None, knowledge: str = "",
               answer_preview: str = "", model: str | None = None) -> int | None:
        """Store an accepted cell (the code actually run) under its standalone question."""
        if self.memory is None:
            return None
        return self.memory.add(question, code, knowledge=knowledge, origin="accepted", schema=self.ehr.schema,
                               dataset=self.ehr.dataset, answer_preview=answer_preview, model=model,
                               generated_code=generated_code if generated_code and generated_code != code else None)

    # -- knowledge ---------------------------------------------------------------------

    def knowledge_view(self):
        """What the model is told about the tables and the clock, each statement marked
        drafted or confirmed (``ehr_magic.knowledge.view.KnowledgeView``)."""
        from ehr_magic.knowledge.view import knowledge_view

        return knowledge_view(self.ehr)

    def edit_knowledge(self, path: str | None = None, folder: str = "."):
        """Write the knowledge to a file to edit (default ``<schema>.knowledge.yaml`` in
        ``folder``); an existing file with other text is kept (``EditFile.written``)."""
        from ehr_magic.db.knowledge_io import knowledge_or_template
        from ehr_magic.knowledge import store as knowledge_store

        return knowledge_store.write_for_edit(self.ehr, path or knowledge_store.default_edit_path(self.ehr, folder),
                                              knowledge_or_template(self.ehr))

    def import_knowledge(self, path: str | None = None) -> str:
        """Check the knowledge file ``path`` (default: the file ``edit_knowledge`` writes) against the database, store it, and reconnect so
        the next question uses it; returns one sentence saying what changed. Raises
        ``KnowledgeRefused`` (every problem, nothing stored) when the file does not fit."""
        from ehr_magic.db import connect
        from ehr_magic.db.knowledge_io import store_prepared
        from ehr_magic.knowledge import store as knowledge_store

        prepared = knowledge_store.prepare_import(self.ehr, path or knowledge_store.default_edit_path(self.ehr))
        target, attachment = self.ehr.path, getattr(self.ehr, "attachment", None)
        self.ehr.close()  # DuckDB lets one process open a file read-only or writable, not both
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

    def llm(self, model: str | None = None):
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

    def _examples(self):
        if self.memory is None:
            return None
        from ehr_magic.memory.examples import MemoryExamples

        return MemoryExamples(self.memory)


class _AlongWith:
    """Few-shot retrieval for a follow-up: the earlier standalone question joins the query."""

    def __init__(self, inner: Any, earlier: str) -> None:
        self.inner, self.earlier = inner, earlier

    def examples(self, question: str, schema: str, k: int) -> list:
        return self.inner.examples(f"{self.earlier} {question}", schema, k)
