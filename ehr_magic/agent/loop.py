"""The agent loop: question -> knowledge -> code -> run -> feedback/debugger -> code ...

EHRAgent's method (knowledge integration, few-shot examples, interactive coding with
execution feedback, rubber-duck debugging, up to T steps), readable in one screen.
The loop prints nothing: it reports progress as ``Event`` objects to ``on_event`` and
returns an ``AgentResult``; front ends (CLI, magic, panel, eval) render them.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import polars as pl

from ehr_magic.engines import QUERY_FAILURES
from ehr_magic.errors import ConfigError
from ehr_magic.knowledge.drafting.profiling import is_unit
from ehr_magic.agent import budget, context, prompts
from ehr_magic.agent.turns import ConversationContext
from ehr_magic.knowledge.handle import Database
from ehr_magic.runtime.executor import (ErrorInfo, Execution, Executor, code_namespace, is_empty_answer, is_zero,
                                        nothing_found, reads_data, shown)
from ehr_magic.agent.hints import searched_for, value_hints
from ehr_magic.agent.metadata import about_schema, metadata_only
from ehr_magic.agent.replies import Reply, parse_reply
from ehr_magic.agent.steps import ActionStep, AgentResult, LLMCall, reminder_exchange
from ehr_magic.agent.table_choice import TablePicker
from ehr_magic.linking.question import Linking, link_question
from ehr_magic.llm import window as llm_window
from ehr_magic.llm.client import Completion
from ehr_magic.llm.config import LLMSettings
from ehr_magic.llm.errors import LLMContextError
from ehr_magic.llm.tokens import estimate_prompt_tokens, estimate_tokens
from ehr_magic.llm.window import ContextWindow
from ehr_magic.memory.fewshot import Example, ExampleSource, SeedExamples
from ehr_magic.safety import GuardReport, check_code, privacy
from ehr_magic.safety.privacy import preview

log = logging.getLogger(__name__)

KnowledgeMode = Literal["separate", "inline", "off"]
RunMode = Literal["auto", "review", "review-if-flagged"]


_CUT_OFF = ("The model's reply was cut off at its token limit before any code was complete: raise the server's "
            "limit on reply tokens (or the model's context window) and ask again.")
_DEBUG_TABLES = 8  # columns of at most this many tables go to the debugger
_WHOLE_TERM = 95  # linking score of a term that names a stored value whole
_UNIT_SHARE = 0.5  # of a term's sureness, for a unit of measure: it names a measurement, seldom its table
_SPREAD = 2.0  # tables a unit may be stored in before it says less still


# What each front end lets the analyst set (%ehr config, %%ehr options, the CLI's): (lowest, highest).
SETTING_RANGES: dict[str, tuple[float, float]] = {
    "steps": (1, 50),  # code attempts of a question: EHRAgent's T is 10
    "shots": (0, 16),  # examples from memory: EHRAgent's K is 4; more rarely fit a window
    "timeout": (0, 24 * 3600),  # seconds one run of generated code may take, above 0
}


def checked_setting(name: str, value: Any) -> Any:
    """``value`` if the setting ``name`` (a key of ``SETTING_RANGES``) may take it, else a
    ``ConfigError`` that says what it may be."""
    low, high = SETTING_RANGES[name]
    if name == "timeout":
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (number and low < value <= high):  # NaN is no number of seconds either
            raise ConfigError(f"{name} must be a number of seconds above {low:g} and at most {high:,.0f}; "
                              f"got {value!r}.")
    elif isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{name} must be a whole number from {low:g} to {high:g}; got {value!r}.")
    return value


@dataclass
class AgentSettings:
    max_steps: int = 10  # the error budget: failed steps
    max_observations: int = 3  # steps that only look (print, describe) before answering, counted apart
    shots: int = 4
    knowledge: KnowledgeMode = "inline"  # one call per step; see docs/agent.md for the measurement
    timeout: float = 60.0
    debugger: bool = True
    stream: bool | None = None  # None: the LLM settings decide
    privacy: str | None = None  # schema | aggregates | full; None: privacy.default_level(ehr)
    run_mode: RunMode = "auto"  # auto: guarded code runs at once
    execute: bool = True  # False: return the first code unrun (status "generated")

    def __post_init__(self) -> None:
        # Every front end builds these from what the analyst typed: one check for all of them.
        checked_setting("steps", self.max_steps)
        checked_setting("shots", self.shots)
        checked_setting("timeout", self.timeout)


@dataclass
class Event:
    kind: Literal["phase", "context", "token", "step", "done"]
    phase: str = ""  # examples | knowledge | code | run | debug
    detail: str = ""
    step: ActionStep | None = None
    result: AgentResult | None = None
    elapsed: float = 0.0
    examples: list[Example] = field(default_factory=list)  # context: the few-shot examples in the prompt
    tables: list[str] = field(default_factory=list)  # context: the tables described in the prompt


@dataclass
class Prompt:
    """The first request of a question and how it was fitted into the window."""

    messages: list[dict[str, str]]
    layout: budget.Layout
    window: ContextWindow
    tables: list[str]  # in the prompt, best first: the first ``layout.tables`` in full, the rest in one line
    examples: list[Example]  # in the prompt, best first
    render: Callable[..., list[dict[str, str]]]  # layout (, knowledge) -> messages
    linked: str = ""  # the stored values the question's words may name, as the prompt states them

    @property
    def example_ids(self) -> list[str]:
        return [e.id for e in self.examples]


@dataclass
class _Run:
    """The state of one question's run, step to step."""

    question: str
    context: ConversationContext | None
    result: AgentResult
    emit: Callable[..., None]
    started: float
    prompt: Prompt  # the first request as fitted; replaced when the server turns out to have a smaller window
    first: list[dict[str, str]] = field(default_factory=list)  # the first request: system prompt and question
    text: str = ""  # the latest reply
    index: int = 0
    failures: int = 0  # failed steps spend the error budget; look-ups have their own cap
    observations: int = 0
    reminded: bool = False
    unanswered: str = ""  # the step under way began with a reply without code, answered with the reminder
    previous_code: str | None = None
    done: bool = False

    @property
    def window(self) -> ContextWindow:
        return self.prompt.window

    @property
    def messages(self) -> list[dict[str, str]]:
        """The conversation sent to the model, derived: the first request, each step's exchange, and
        the reminder of the step under way."""
        steps = [message for step in self.result.steps for message in step.to_messages()]
        return [*self.first, *steps, *(reminder_exchange(self.unanswered) if self.unanswered else [])]

    def add(self, step: ActionStep) -> None:
        step.reminded, self.unanswered = self.unanswered, ""
        self.result.steps.append(step)

    def progress(self, max_steps: int) -> str:
        return f"step {self.index}/{max_steps + self.observations}"

    def finish(self, message: str) -> None:
        self.result.message, self.done = message, True


class Agent:
    """Answers questions about one ``EHR`` with one LLM client."""

    def __init__(self, ehr: Database, llm: Any, *, examples: ExampleSource | None = None,
                 settings: AgentSettings | None = None, tools: Mapping[str, Any] | None = None,
                 skill_cards: Callable[[str, str], str] | None = None) -> None:
        """``tools``: names the code may use besides ``ehr`` (the session gives ``skills``);
        ``skill_cards(question, schema)``: the prompt lines about the skills a question needs."""
        self.ehr, self.llm = ehr, llm
        self.tools = dict(tools or {})
        self.skill_cards = skill_cards
        self.examples = examples or SeedExamples()
        self.settings = settings or AgentSettings()
        self.executor = Executor(ehr, timeout=self.settings.timeout)
        level = self.settings.privacy
        self.privacy = privacy.check_level(level) if level else privacy.default_level(ehr)

    def run(self, question: str, *, on_event: Callable[[Event], None] | None = None,
            conversation_context: ConversationContext | None = None) -> AgentResult:
        """Answer ``question``; ``context`` (earlier turns, notebook variables) is
        rendered into its user message and its variables join the code's namespace."""
        run = self._start(question, on_event, conversation_context)
        while not run.done and run.failures < self.settings.max_steps:
            self._step(run)
        run.result.own_seconds = time.perf_counter() - run.started - run.result.model_seconds
        run.emit(kind="done", result=run.result)
        return run.result

    def _start(self, question: str, on_event: Callable[[Event], None] | None,
               conversation_context: ConversationContext | None) -> _Run:
        """The first request: examples, tables, the window (and the knowledge call in ``separate`` mode)."""
        started = time.perf_counter()
        emit = (lambda **kw: on_event(Event(elapsed=time.perf_counter() - started, **kw))) if on_event \
            else (lambda **kw: None)
        result = AgentResult(question=question, status="failed", model=getattr(self.llm.settings, "model", ""))
        emit(kind="phase", phase="examples")
        prompt = self.prompt(question, conversation_context)
        run = _Run(question, conversation_context, result, emit, started, prompt)
        self._use_prompt(run, prompt)
        if self.settings.knowledge == "separate":
            emit(kind="phase", phase="knowledge")
            full = run.prompt.layout.tables
            tables = context.table_details(self.ehr, run.prompt.tables[:full], run.prompt.tables[full:])
            ask = (prompts.phrase("tables", tables=tables) + "\n\n" if tables else "") + \
                prompts.render("knowledge", question=question)
            result.knowledge = self._call(result, "knowledge", [run.messages[0], _user(ask)]).text.strip()
            run.first = run.prompt.render(run.prompt.layout, result.knowledge)
        return run

    def _use_prompt(self, run: _Run, prompt: Prompt) -> None:
        run.prompt, run.first = prompt, prompt.messages
        run.result.examples, run.result.tables, run.result.linked = prompt.example_ids, prompt.tables, prompt.linked
        run.result.context_window = prompt.window.tokens
        # what the model is shown, as it is chosen: front ends watch it without patching anything
        run.emit(kind="context", examples=list(prompt.examples), tables=list(prompt.tables))

    def _step(self, run: _Run) -> None:
        """One step: a model call, its reply read, the code checked and run, the outcome judged and fed back."""
        s, result = self.settings, run.result
        run.index += 1
        run.emit(kind="phase", phase="code", detail=run.progress(s.max_steps))
        reply = self._reply(run)
        if reply is None:
            return
        if reply.kind in ("clarify", "abstain"):
            result.status = "clarify" if reply.kind == "clarify" else "abstained"
            run.finish(reply.message)
            return
        step = ActionStep(run.index, reply=run.text, code=reply.code,
                          knowledge=result.knowledge if s.knowledge == "separate" else reply.knowledge)
        flagged = s.run_mode == "review-if-flagged" and check_code(step.code).flagged
        if not s.execute or s.run_mode == "review" or flagged:  # the analyst runs it after reading it
            result.status, result.code, result.knowledge = "generated", step.code, step.knowledge
            run.add(step)
            run.finish("flagged by the code guard for review: " + check_code(step.code).describe()
                       if flagged else "generated for review; not run")
            return
        run.emit(kind="phase", phase="run", detail=run.progress(s.max_steps))
        execution, report, shared = self._execute(step, run.context)
        if execution.ok and self._judge(step, execution, result.standalone_question or run.question, shared,
                                        looks_left=s.max_observations - run.observations,
                                        repeated=step.code == run.previous_code):
            result.status, result.answer, result.code = "answered", execution.answer, step.code
            result.knowledge = step.knowledge
            result.namespace = {k: v for k, v in execution.namespace.items()
                                if not k.startswith("__") and not (k in shared and shared[k] is v)}
            run.add(step)
            run.emit(kind="step", step=step)
            run.finish(step.note)  # an earlier step's failure is history; "none found" is news
            return
        if step.observation:  # it looked: the output goes back, no debugger, no failure
            run.observations += 1
            step.shown = self._shown(execution, step, self.privacy)
            step.feedback = prompts.render("observation", output=step.shown,
                                           remaining=_looks_left(s.max_observations - run.observations))
        else:
            run.failures += 1
            # an empty result with values stored nowhere: the hints name the cause, no debugger needed
            explained = bool(step.hints) and step.soft_failure.startswith("`answer` is")
            self._feedback(result, step, report, run.question, run.context,
                           debug=s.debugger and run.failures < s.max_steps and not explained,
                           emit=lambda: run.emit(kind="phase", phase="debug", detail=run.progress(s.max_steps)))
            result.message = context.trace_text(step.error, step.soft_failure, step.stdout)
        run.add(step)
        run.emit(kind="step", step=step)
        run.previous_code = step.code

    def _reply(self, run: _Run) -> Reply | None:
        """The model's reply to the messages so far, read; None when the run ends here (no room left in
        the window, a reply cut off, or no code twice)."""
        fitted = budget.trim_steps(run.messages, run.window)
        if fitted is None:
            run.finish(budget.too_long(estimate_prompt_tokens(run.messages), run.window))
            return None
        on_token = lambda t: run.emit(kind="token", detail=t)  # noqa: E731
        try:
            completion = self._call(run.result, "code", fitted, on_token=on_token)
        except LLMContextError as exc:  # the server's window is smaller than we were told
            learned = llm_window.learn_from_error(getattr(self.llm, "settings", None), str(exc))
            if run.index > 1 or learned is None or learned.tokens >= run.window.tokens:
                raise
            self._use_prompt(run, self.prompt(run.question, run.context, window=learned))
            completion = self._call(run.result, "code", run.messages, on_token=on_token)
        reply = self._read(run, completion.text)
        if completion.finish_reason == "length" and (reply.kind == "none" or run.text.count("```") % 2):
            run.finish(_CUT_OFF)  # a code block left open: the rest was cut
            return None
        if reply.kind == "none" and not run.reminded:  # one reminder, then a clear failure
            run.reminded, run.unanswered = True, run.text
            completion = self._call(run.result, "reminder", budget.trim_steps(run.messages, run.window) or run.messages)
            reply = self._read(run, completion.text)
        if reply.kind == "none":
            run.finish(_CUT_OFF if completion.finish_reason == "length" else (
                "The model replied without code twice; try rephrasing the question, or use a model "
                "that follows instructions better."))
            return None
        return reply

    @staticmethod
    def _read(run: _Run, text: str) -> Reply:
        run.text = text
        reply = parse_reply(text)
        run.result.standalone_question = reply.standalone or run.result.standalone_question
        return reply

    def _execute(self, step: ActionStep, conversation_context: ConversationContext | None,
                 ) -> tuple[Execution, GuardReport, dict[str, Any]]:
        """Check and run the step's code with the notebook's variables; ``(execution, guard report,
        the notebook variables shared with the code)``."""
        namespace, shared = code_namespace(self.ehr, conversation_context.namespace if conversation_context else None,
                                           self.tools)
        report = check_code(step.code)
        if report.allowed or report.syntax_error:  # code that does not parse cannot run: the executor says why
            execution = self.executor.run(step.code, namespace)
        else:
            execution = Execution(ok=False, error=ErrorInfo("Blocked", report.describe()), namespace=namespace)
        step.run_seconds, step.stdout, step.error = execution.seconds, execution.stdout, execution.error
        return execution, report, shared

    def _judge(self, step: ActionStep, execution: Execution, question: str, shared: dict[str, Any], *,
               looks_left: int, repeated: bool) -> bool:
        """Whether code that ran answered the question. When it did not, sets ``step.observation``
        (it only looked, and may: the output goes back to the model) or ``step.soft_failure``."""
        step.answer_preview = preview(execution.answer) if execution.has_answer else ""
        if not execution.has_answer:
            shown = bool(execution.stdout.strip()) or execution.last_value is not None
            if shown and looks_left > 0:
                step.observation = self._shown(execution, step, "full")
                return False
            step.soft_failure = prompts.phrase("soft_unset_looked" if shown else "soft_unset")
            return False
        # names of columns or tables answer no question about the data: a look-up, unless the model
        # keeps it (the same code again) or has no look-ups left
        if looks_left > 0 and not repeated and not about_schema(question) and metadata_only(execution.answer, self.ehr):
            step.observation = self._shown(execution, step, "full")
            return False
        from_data = reads_data(step.code, {"ehr", *self.tools, *shared})
        step.soft_failure = is_empty_answer(execution.answer) or ("" if from_data else prompts.phrase("soft_typed_in"))
        if from_data and (nothing_found(execution.answer) or is_zero(execution.answer)):
            # A sound query that finds nothing has answered: "none found", and what it searched for.
            # Unsound (it compares a column with a text stored nowhere in it): the hints say why, and
            # the model may confirm the empty answer (the same code again, or TERMINATE).
            hints = privacy.filter_hints(value_hints(step.code, self.ehr), self.ehr, self.privacy)
            step.hints = [h.describe() for h in hints]
            if hints and not repeated and "TERMINATE" not in step.reply:
                step.soft_failure = step.soft_failure or "`answer` is 0"
            else:
                step.soft_failure = ""
                step.note = _none_found(searched_for(step.code, self.ehr), zero=is_zero(execution.answer))
        return not step.soft_failure

    def _shown(self, execution: Execution, step: ActionStep, level: str) -> str:
        """What a look-up step showed, at the privacy ``level``: its printed output, the value of its
        last line, or an `answer` that holds only names of columns or tables (whole, at ``full``)."""
        parts = []
        if execution.stdout.strip():
            stdout = execution.stdout if level == "full" else \
                privacy.mask_stdout(execution.stdout, level, self.ehr, step.code)
            parts.append(prompts.phrase("printed", output=stdout.strip()))
        if execution.has_answer:  # names of columns or tables only (``_judge``)
            parts.append(prompts.phrase("shown_answer", value=self._value(execution.answer, level, step.code)))
        elif execution.last_value is not None:
            parts.append(prompts.phrase("shown_last_value", value=self._value(execution.last_value, level, step.code)))
        return "\n".join(parts)

    def _value(self, value: Any, level: str, code: str) -> str:
        if level == "full" and isinstance(value, (pl.DataFrame, pl.Series)):
            return shown(value)  # whole, as printed output shows it
        return privacy.describe_answer(value, level, ehr=self.ehr, code=code)

    def _feedback(self, result: AgentResult, step: ActionStep, report: GuardReport, question: str,
                  conversation_context: ConversationContext | None, *, debug: bool,
                  emit: Callable[[], None]) -> None:
        """The failure feedback of ``step``: what went wrong (masked at the privacy level), the
        closest stored values of strings that match nothing, and the debugger's note."""
        if not step.hints and report.allowed:
            hints = value_hints(step.code, self.ehr)
            step.hints = [h.describe() for h in privacy.filter_hints(hints, self.ehr, self.privacy)]
        # What the model sees is masked at the privacy level; the analyst (result.message) sees everything.
        shown_error = step.error if step.error is None or step.error.type == "Blocked" else \
            privacy.mask_error(step.error, self.privacy, self.ehr, step.code)
        trace = context.trace_text(shown_error, step.soft_failure,
                                   privacy.mask_stdout(step.stdout, self.privacy, self.ehr, step.code))
        if debug:
            emit()
            earlier = "\n".join(t.code for t in conversation_context.turns) if conversation_context else ""
            step.debugger_note = self._debug(result, _debugged_question(question, result, conversation_context),
                                             step.code, trace, step.hints, earlier_code=earlier)
        unmatched = "\n" + prompts.phrase("feedback_hints", hints="\n".join(f"- {h}" for h in step.hints)) + "\n" \
            if step.hints else ""
        note = "\n" + prompts.phrase("feedback_debugger", note=step.debugger_note) + "\n" if step.debugger_note else ""
        step.feedback = prompts.render("feedback", outcome=trace, hints=unmatched, debugger=note)

    def prompt(self, question: str, conversation_context: ConversationContext | None = None, *,
               window: ContextWindow | None = None) -> Prompt:
        """The first request for ``question``, fitted into the model's window (no model call).

        Raises ``PromptTooLongError`` when even the smallest layout does not fit."""
        shots = self.examples.examples(question, self.ehr.schema, self.settings.shots)
        linking = link_values(self.ehr, question)
        linked = context.linked_values(linking)
        sure, named = linked_tables(linking, self.ehr.tables())
        choice = self.table_picker.choose(question, [(e.question, e.code) for e in shots], linked=sure, events=named,
                                          values_said=whole_terms(linking), values_meant=whole_values(linking),
                                          values_found=best_values(linking))
        skills_text = self.skill_cards(question, self.ehr.schema) if self.skill_cards else ""
        conversation = conversation_context if conversation_context and not conversation_context.empty else None
        window = window or self.context_window()

        @functools.lru_cache(maxsize=None)  # the fit renders the same tables several times
        def conventions_of(shown: tuple[str, ...]) -> str:
            return context.question_conventions(self.ehr, shown, question)

        def render(layout: budget.Layout, knowledge: str = "") -> list[dict[str, str]]:
            system = {"role": "system", "content": context.system_prompt(self.ehr, full_index=layout.full_index,
                                                                        columns=layout.index_columns,
                                                                        conventions=layout.all_conventions,
                                                                        listed=layout.index_tables)}
            # the conventions a system message without them leaves to the question: its full tables' own
            conventions = "" if layout.all_conventions else conventions_of(choice.tables[:layout.tables])
            # the spine's line first: most tables join it, so it says their common joins once
            lines = sorted(choice.tables[layout.tables:layout.tables + layout.brief],
                           key=lambda t: t not in self.table_picker.spine)
            tables = context.table_details(self.ehr, choice.tables[:layout.tables], lines,
                                           brief_columns=not layout.index_columns)
            text = context.question_message(question, shots[:layout.examples], knowledge,
                                            skills_text if layout.skills else "", tables=tables, values=linked,
                                            conventions=conventions)
            if conversation is not None:  # earlier turns and notebook variables
                fitted = conversation if layout.history_tokens is None else \
                    dataclasses.replace(conversation, budget_tokens=layout.history_tokens)
                text = fitted.render() + "\n" + text
            return [system, _user(text)]

        columns, all_conventions, listed = budget.system_form(
            lambda with_columns, conventions, listed: estimate_tokens(context.system_prompt(
                self.ehr, full_index=False, columns=with_columns, conventions=conventions, listed=listed)),
            window.tokens, self._index_name_tokens)
        full_sizes = [estimate_tokens(context.table_details(self.ehr, [t])) for t in choice.tables]
        brief_sizes = [estimate_tokens(context.table_details(self.ehr, [], [t], brief_columns=not columns))
                       for t in choice.tables]
        described, brief = budget.tables_within(full_sizes, brief_sizes, window.tokens, choice.needed())
        needed = min(described, choice.needed())  # the rest in one line each: the index has their columns
        described, brief = needed, brief + described - needed
        full = budget.Layout(tables=described, brief=brief, examples=len(shots), skills=bool(skills_text),
                             index_columns=columns, all_conventions=all_conventions, index_tables=listed)
        layout, messages = budget.fit(full, render, window)
        return Prompt(messages, layout, window, list(choice.tables[:layout.tables + layout.brief]),
                      list(shots[:layout.examples]), render, linked)

    @cached_property
    def _index_name_tokens(self) -> list[int]:
        """The tokens of each table's name in a bounded system index, in its order (``index_order``)."""
        return [estimate_tokens(f"{t}, ") for t in context.index_order(self.ehr)]

    @cached_property
    def table_picker(self) -> TablePicker:
        """Scores this database's tables for each question (built on first use)."""
        return TablePicker(self.ehr)

    def context_window(self) -> ContextWindow:
        """The model's window: settings, else the server, else a default (``ehr_magic.llm.window``)."""
        settings = getattr(self.llm, "settings", None)
        if isinstance(settings, LLMSettings):
            return llm_window.context_window(settings)
        return ContextWindow(llm_window.DEFAULT_LOCAL_WINDOW, "default")

    def _debug(self, result: AgentResult, question: str, code: str, trace: str, hints: list[str], *,
               earlier_code: str = "") -> str:
        # the tables the code names, then those of the conversation's earlier code and those chosen for
        # the question: code that builds a table's name at run time, or never got to one, still gets
        # the columns it is likely to need
        named = [*context.tables_in_code(self.ehr, code), *context.tables_in_code(self.ehr, earlier_code)]
        tables = list(dict.fromkeys([*named, *result.tables]))[:_DEBUG_TABLES]
        columns = "\n".join(f"{t}: {', '.join(self.ehr.columns(t))}" for t in tables)
        body = prompts.render("debugger", question=question, numbered_code=context.numbered(code),
                              trace=trace + ("\n" + "\n".join(hints) if hints else "") +
                              ("\n\n" + prompts.phrase("debugger_columns", columns=columns) if columns else ""))
        messages = [{"role": "system", "content": prompts.render("debugger_system")}, _user(body)]
        return self._call(result, "debug", messages).text.strip()

    def _call(self, result: AgentResult, purpose: str, messages: list[dict[str, str]],
              on_token: Callable[[str], None] | None = None) -> Completion:
        completion = self.llm.chat(messages, purpose=purpose, stream=self.settings.stream, on_token=on_token)
        result.llm_calls.append(LLMCall(purpose, completion.prompt_tokens, completion.completion_tokens,
                                        completion.latency_s, completion.call_id))
        result.model_seconds += completion.latency_s
        return completion


def whole_terms(linking: Linking) -> list[str]:
    """The question's terms that name a stored value whole (as written, or by what they stand for)."""
    return [term.text for term in linking.terms if term.values and term.values[0].score >= _WHOLE_TERM]


def whole_values(linking: Linking) -> list[str]:
    """The stored values that the question's terms name whole."""
    return list(dict.fromkeys(value.value for term in linking.terms for value in term.values
                              if value.score >= _WHOLE_TERM))


def best_values(linking: Linking) -> dict[str, float]:
    """The stored value each term is likeliest to name, with how surely (0-1)."""
    found: dict[str, float] = {}
    for term in linking.terms:
        if term.values:
            best = term.values[0]
            found[best.value] = max(found.get(best.value, 0.0), best.score / 100)
    return found


def linked_tables(linking: Linking, tables: list[str]) -> tuple[dict[str, float], dict[str, set[str]]]:
    """What linking says about the tables: table -> how surely (0-1) the question names a stored
    value of it, and a dictionary table -> the tables its linked rows name (a value of a row that is
    a table's name: an item's 'linksto')."""
    sure: dict[str, float] = {}
    named: dict[str, set[str]] = {}
    by_name = {t.lower(): t for t in tables}
    for term in linking.terms:
        # a unit of measure ('units', 'mg') says little of the table, and less the more tables store it
        whole = [v for v in term.values if v.score >= _WHOLE_TERM]
        spread = len({v.table for v in whole})
        share = _UNIT_SHARE * min(1.0, _SPREAD / spread) if whole and all(is_unit(v.value) for v in whole) else 1.0
        for value in term.values:
            sure[value.table] = max(sure.get(value.table, 0.0), share * value.score / 100)
    for value in linking.values():
        for row in value.rows:
            named.setdefault(value.table, set()).update(by_name[v.lower()] for _, v in row if v.lower() in by_name)
    return sure, {t: n for t, n in named.items() if n}


def link_values(ehr: Database, question: str) -> Linking:
    """The stored values ``question``'s words may name; none when linking fails, since the model can
    still look them up (a database whose lookup columns cannot be read must still be asked)."""
    try:
        return link_question(ehr, question)
    except QUERY_FAILURES:  # a column that cannot be read does not stop the question; a bug keeps its traceback
        log.warning("Value linking failed for %r", question, exc_info=True)
        return Linking()


def _debugged_question(question: str, result: AgentResult, conversation: ConversationContext | None) -> str:
    """The question as the debugger needs it: standalone. A follow-up's few words ("Only in August.")
    mean nothing alone, so the model's restatement, else the earlier questions, go with them."""
    if result.standalone_question and result.standalone_question != question:
        return prompts.phrase("debugger_followup", standalone=result.standalone_question, question=question)
    earlier = [turn.question for turn in conversation.turns] if conversation is not None else []
    if not earlier:
        return question
    # the question itself first: it is what the code must answer; its conversation follows
    return prompts.phrase("debugger_conversation", question=question, earlier="\n".join(f"- {q}" for q in earlier[-3:]))


def _none_found(searched: str, *, zero: bool) -> str:
    """What the analyst reads next to an empty (or zero) answer: that nothing was found, and where; the
    model too, in the turns after it (``ehr_magic.session``)."""
    qualifier = " " + prompts.phrase("result_zero") if zero else ""
    return prompts.phrase("none_found_searched", zero=qualifier, searched=searched) if searched else \
        prompts.phrase("none_found", zero=qualifier)


def _looks_left(count: int) -> str:
    if count <= 0:
        return prompts.phrase("looks_last")
    return prompts.phrase("looks_left", count=count, s="s" if count != 1 else "")


def _user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}
