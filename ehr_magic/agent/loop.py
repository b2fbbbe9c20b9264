"""The agent loop: question -> knowledge -> code -> run -> feedback/debugger -> code ...

EHRAgent's method (knowledge integration, few-shot examples, interactive coding with
execution feedback, rubber-duck debugging, up to T steps), readable in one screen.
The loop prints nothing: it reports progress as ``Event`` objects to ``on_event`` and
returns an ``AgentResult``; front ends (CLI, magic, panel, eval) render them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from ehr_magic.agent import budget, context, prompts
from ehr_magic.agent.conversation import ConversationContext
from ehr_magic.agent.executor import ErrorInfo, Execution, Executor, base_namespace, is_empty_answer, reads_data
from ehr_magic.agent.hints import value_hints
from ehr_magic.agent.metadata import about_schema, metadata_only
from ehr_magic.agent.replies import parse_reply
from ehr_magic.agent.steps import ActionStep, AgentResult, LLMCall
from ehr_magic.agent.table_choice import TablePicker
from ehr_magic.llm import window as llm_window
from ehr_magic.llm.config import LLMSettings
from ehr_magic.llm.errors import LLMContextError
from ehr_magic.llm.tokens import estimate_prompt_tokens, estimate_tokens
from ehr_magic.llm.window import ContextWindow
from ehr_magic.memory.fewshot import ExampleSource, SeedExamples
from ehr_magic.safety import GuardReport, check_code, privacy
from ehr_magic.safety.privacy import preview

KnowledgeMode = Literal["separate", "inline", "off"]
RunMode = Literal["auto", "review", "review-if-flagged"]


_CUT_OFF = ("The model's reply was cut off at its token limit before any code was complete: raise the server's "
            "limit on reply tokens (or the model's context window) and ask again.")
_METADATA = ("`answer` holds only names of columns or tables, not data: the question asks about the data, so "
             "compute `answer` from the rows of the tables")
_DEBUG_TABLES = 8  # columns of at most this many tables go to the debugger
_NOT_FROM_DATA = ("`answer` was typed in, not computed from the data: the code never uses `ehr`; read the "
                  "database with ehr.sql or ehr.table and compute `answer` from what it returns")


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


@dataclass
class Event:
    kind: Literal["phase", "token", "step", "done"]
    phase: str = ""  # examples | knowledge | code | run | debug
    detail: str = ""
    step: ActionStep | None = None
    result: AgentResult | None = None
    elapsed: float = 0.0


@dataclass
class Prompt:
    """The first request of a question and how it was fitted into the window."""

    messages: list[dict[str, str]]
    layout: budget.Layout
    window: ContextWindow
    tables: list[str]  # in the prompt, best first: the first ``layout.tables`` in full, the rest in one line
    example_ids: list[str]
    render: Callable[..., list[dict[str, str]]]  # layout (, knowledge) -> messages


class Agent:
    """Answers questions about one ``EHR`` with one LLM client."""

    def __init__(self, ehr: Any, llm: Any, *, examples: ExampleSource | None = None,
                 settings: AgentSettings | None = None) -> None:
        self.ehr, self.llm = ehr, llm
        self.examples = examples or SeedExamples()
        self.settings = settings or AgentSettings()
        self.executor = Executor(ehr, timeout=self.settings.timeout)
        level = self.settings.privacy
        self.privacy = privacy.check_level(level) if level else privacy.default_level(ehr)

    def run(self, question: str, *, on_event: Callable[[Event], None] | None = None,
            conversation_context: ConversationContext | None = None) -> AgentResult:
        """Answer ``question``; ``context`` (earlier turns, notebook variables) is
        rendered into its user message and its variables join the code's namespace."""
        started = time.perf_counter()
        emit = (lambda **kw: on_event(Event(elapsed=time.perf_counter() - started, **kw))) if on_event else (lambda **kw: None)
        s = self.settings
        result = AgentResult(question=question, status="failed", model=getattr(self.llm.settings, "model", ""))
        emit(kind="phase", phase="examples")
        prompt = self.prompt(question, conversation_context)
        messages, window = prompt.messages, prompt.window
        result.examples, result.tables, result.context_window = prompt.example_ids, prompt.tables, window.tokens
        if s.knowledge == "separate":
            emit(kind="phase", phase="knowledge")
            full = prompt.layout.tables
            tables = context.table_details(self.ehr, prompt.tables[:full], prompt.tables[full:])
            ask = (f"Tables for this question:\n{tables}\n\n" if tables else "") + \
                prompts.render("knowledge", question=question)
            result.knowledge = self._call(result, "knowledge", [messages[0], _user(ask)]).text.strip()
            messages = prompt.render(prompt.layout, result.knowledge)
        reminded, previous_code = False, None
        index = failures = observations = 0  # failed steps spend the error budget; look-ups their own cap
        while failures < s.max_steps:
            index += 1
            emit(kind="phase", phase="code", detail=f"step {index}/{s.max_steps + observations}")
            fitted = budget.trim_steps(messages, window)
            if fitted is None:
                result.message = budget.too_long(estimate_prompt_tokens(messages), window)
                break
            try:
                completion = self._call(result, "code", fitted, on_token=lambda t: emit(kind="token", detail=t))
            except LLMContextError as exc:  # the server's window is smaller than we were told
                learned = llm_window.learn_from_error(getattr(self.llm, "settings", None), str(exc))
                if index > 1 or learned is None or learned.tokens >= window.tokens:
                    raise
                prompt = self.prompt(question, conversation_context, window=learned)
                messages, window = prompt.messages, prompt.window
                result.examples, result.tables, result.context_window = prompt.example_ids, prompt.tables, window.tokens
                completion = self._call(result, "code", messages, on_token=lambda t: emit(kind="token", detail=t))
            text = completion.text
            reply = parse_reply(text)
            result.standalone_question = reply.standalone or result.standalone_question
            if completion.finish_reason == "length" and (reply.kind == "none" or text.count("```") % 2):
                result.message = _CUT_OFF  # a code block left open: the rest was cut
                break
            if reply.kind == "none" and not reminded:  # one reminder, then a clear failure
                reminded = True
                messages += [{"role": "assistant", "content": text}, _user(prompts.render("reminder"))]
                completion = self._call(result, "reminder", budget.trim_steps(messages, window) or messages)
                text = completion.text
                reply = parse_reply(text)
                result.standalone_question = reply.standalone or result.standalone_question
            if reply.kind in ("clarify", "abstain"):
                result.status = "clarify" if reply.kind == "clarify" else "abstained"
                result.message = reply.message
                break
            if reply.kind == "none":
                result.message = _CUT_OFF if completion.finish_reason == "length" else (
                    "The model replied without code twice; try rephrasing the question, or use a model "
                    "that follows instructions better.")
                break
            step = ActionStep(index, reply=text, code=reply.code,
                              knowledge=result.knowledge if s.knowledge == "separate" else reply.knowledge)
            flagged = s.run_mode == "review-if-flagged" and check_code(step.code).flagged
            if not s.execute or s.run_mode == "review" or flagged:  # the analyst runs it after reading it
                result.status, result.code, result.knowledge = "generated", step.code, step.knowledge
                result.message = "flagged by the code guard for review: " + check_code(step.code).describe() \
                    if flagged else "generated for review; not run"
                result.steps.append(step)
                break
            emit(kind="phase", phase="run", detail=f"step {index}/{s.max_steps + observations}")
            looks_left = s.max_observations - observations
            execution, report, shared = self._execute(step, conversation_context)
            if execution.ok and self._judge(step, execution, result.standalone_question or question, shared,
                                            looks_left=looks_left, repeated=step.code == previous_code):
                result.status, result.answer, result.code = "answered", execution.answer, step.code
                result.knowledge, result.message = step.knowledge, ""  # an earlier step's failure is history
                result.namespace = {k: v for k, v in execution.namespace.items()
                                    if not k.startswith("__") and not (k in shared and shared[k] is v)}
                result.steps.append(step)
                emit(kind="step", step=step)
                break
            if step.observation:  # it looked: the output goes back, no debugger, no failure
                observations += 1
                step.feedback = prompts.render(
                    "observation", output=self._shown(execution, step, self.privacy),
                    remaining=_looks_left(s.max_observations - observations))
            else:
                failures += 1
                self._feedback(result, step, report, question, conversation_context,
                               debug=s.debugger and failures < s.max_steps,
                               emit=lambda: emit(kind="phase", phase="debug", detail=f"step {index}/{s.max_steps + observations}"))
                result.message = context.trace_text(step.error, step.soft_failure, step.stdout)
            result.steps.append(step)
            emit(kind="step", step=step)
            messages += step.to_messages()
            previous_code = step.code
        result.own_seconds = time.perf_counter() - started - result.model_seconds
        emit(kind="done", result=result)
        return result

    def _execute(self, step: ActionStep, conversation_context: ConversationContext | None,
                 ) -> tuple[Execution, GuardReport, dict[str, Any]]:
        """Check and run the step's code with the notebook's variables; ``(execution, guard report,
        the notebook variables shared with the code)``."""
        namespace = base_namespace(self.ehr)
        # the notebook's variables, but never its `answer`: a stale one would pass for this code's result
        shared = {k: v for k, v in (conversation_context.namespace if conversation_context else {}).items()
                  if k != "answer"}
        for name, value in shared.items():  # the notebook's variables, as in the kernel
            namespace.setdefault(name, value)
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
            step.soft_failure = "the code did not set `answer`" + (
                " (it only looked, and the look-ups allowed for one question are used up: answer with what they "
                "showed)" if shown else "")
            return False
        # names of columns or tables answer no question about the data: a look-up, unless the model
        # keeps it (the same code again) or has no look-ups left
        if looks_left > 0 and not repeated and not about_schema(question) and metadata_only(execution.answer, self.ehr):
            step.observation = self._shown(execution, step, "full")
            return False
        step.soft_failure = is_empty_answer(execution.answer) \
            or ("" if reads_data(step.code, {"ehr", "skills", *shared}) else _NOT_FROM_DATA)
        # an empty answer stands when the model confirms it: the same code again, or TERMINATE
        if step.soft_failure.startswith("`answer` is an empty") and (repeated or "TERMINATE" in step.reply):
            step.soft_failure = ""
        return not step.soft_failure

    def _shown(self, execution: Execution, step: ActionStep, level: str) -> str:
        """What a look-up step showed, at the privacy ``level``: its printed output, the value of its
        last line, or an `answer` that holds only names of columns or tables."""
        parts = []
        if execution.stdout.strip():
            stdout = execution.stdout if level == "full" else \
                privacy.mask_stdout(execution.stdout, level, self.ehr, step.code)
            parts.append(f"Printed output:\n{stdout.strip()}")
        if execution.has_answer:
            parts.append(f"`answer` = {privacy.describe_answer(execution.answer, level, ehr=self.ehr, code=step.code)}\n"
                         f"{_METADATA}.")
        elif execution.last_value is not None:
            value = privacy.describe_answer(execution.last_value, level, ehr=self.ehr, code=step.code)
            parts.append(f"Value of the last line:\n{value}")
        return "\n".join(parts)

    def _feedback(self, result: AgentResult, step: ActionStep, report: GuardReport, question: str,
                  conversation_context: ConversationContext | None, *, debug: bool,
                  emit: Callable[[], None]) -> None:
        """The failure feedback of ``step``: what went wrong (masked at the privacy level), the
        closest stored values of strings that match nothing, and the debugger's note."""
        hints = value_hints(step.code, self.ehr) if report.allowed else []
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
        step.feedback = prompts.render(
            "feedback", outcome=trace,
            hints=("\nValues in the code that match nothing stored:\n" + "\n".join(f"- {h}" for h in step.hints)
                   + "\n") if step.hints else "",
            debugger=f"\nDebugger's note: {step.debugger_note}\n" if step.debugger_note else "")

    def prompt(self, question: str, conversation_context: ConversationContext | None = None, *,
               window: ContextWindow | None = None) -> Prompt:
        """The first request for ``question``, fitted into the model's window (no model call).

        Raises ``PromptTooLongError`` when even the smallest layout does not fit."""
        shots = self.examples.examples(question, self.ehr.schema, self.settings.shots)
        choice = self.table_picker.choose(question, [(e.question, e.code) for e in shots])
        skills_text = _skills_for(question, self.ehr.schema)
        conversation = conversation_context if conversation_context and not conversation_context.empty else None
        window = window or self.context_window()

        def render(layout: budget.Layout, knowledge: str = "") -> list[dict[str, str]]:
            system = {"role": "system", "content": context.system_prompt(self.ehr, full_index=layout.full_index,
                                                                        columns=layout.index_columns)}
            tables = context.table_details(self.ehr, choice.tables[:layout.tables],
                                           choice.tables[layout.tables:layout.tables + layout.brief])
            text = context.question_message(question, shots[:layout.examples], knowledge,
                                            skills_text if layout.skills else "", tables=tables)
            if conversation is not None:  # earlier turns and notebook variables
                fitted = conversation if layout.history_tokens is None else \
                    dataclasses.replace(conversation, budget_tokens=layout.history_tokens)
                text = fitted.render() + "\n" + text
            return [system, _user(text)]

        full_sizes = [estimate_tokens(context.table_details(self.ehr, [t])) for t in choice.tables]
        brief_sizes = [estimate_tokens(context.table_details(self.ehr, [], [t])) for t in choice.tables]
        described, brief = budget.tables_within(full_sizes, brief_sizes, window.tokens)
        full = budget.Layout(tables=described, brief=brief, examples=len(shots), skills=bool(skills_text))
        layout, messages = budget.fit(full, render, window)
        return Prompt(messages, layout, window, list(choice.tables[:layout.tables + layout.brief]),
                      [e.id for e in shots[:layout.examples]], render)

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
                              (f"\n\nColumns of the tables:\n{columns}" if columns else ""))
        messages = [{"role": "system", "content": prompts.render("debugger_system")}, _user(body)]
        return self._call(result, "debug", messages).text.strip()

    def _call(self, result: AgentResult, purpose: str, messages: list[dict[str, str]],
              on_token: Callable[[str], None] | None = None):
        completion = self.llm.chat(messages, purpose=purpose, stream=self.settings.stream, on_token=on_token)
        result.llm_calls.append(LLMCall(purpose, completion.prompt_tokens, completion.completion_tokens,
                                        completion.latency_s, completion.call_id))
        result.model_seconds += completion.latency_s
        return completion


def _debugged_question(question: str, result: AgentResult, conversation: ConversationContext | None) -> str:
    """The question as the debugger needs it: standalone. A follow-up's few words ("Only in August.")
    mean nothing alone, so the model's restatement, else the earlier questions, go with them."""
    if result.standalone_question and result.standalone_question != question:
        return f"{result.standalone_question}\n(asked as a follow-up: {question})"
    earlier = [turn.question for turn in conversation.turns] if conversation is not None else []
    if not earlier:
        return question
    return "\n".join(["(the latest of a conversation; earlier questions:)", *(f"- {q}" for q in earlier[-3:]),
                      question])


def _looks_left(count: int) -> str:
    if count <= 0:
        return "That was the last look-up for this question: your next code must set `answer`."
    return f"You may look {count} more time{'s' if count != 1 else ''} before you answer."


def _skills_for(question: str, schema: str) -> str:
    """Only the verified clinical skills relevant to this question (retrieved, not all)."""
    from ehr_magic import skills

    return skills.prompt_section(question, schema)


def _user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}
