"""``%%ehr`` and ``%ehr``: thin IPython shells over the assistant.

Settings are traitlets (``%config EhrMagics.model = "gpt-4o"``); options of one cell
come from ``magic_arguments`` (``%%ehr?``). User mistakes and model problems are shown
as one clear message, never a traceback, and never stop "Run all".
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import HTML, DisplayHandle, display
from traitlets import Bool, Enum, Float, Integer, TraitError, Unicode, validate
from traitlets.config import Configurable

from ehr_magic.agent import AgentSettings, Event, checked_setting
from ehr_magic.agent.loop import KnowledgeMode, RunMode
from ehr_magic.sources.demo import default_target
from ehr_magic.errors import ConfigError, EhrMagicError
from ehr_magic.magic import command, render
from ehr_magic.magic.command import CommandError
from ehr_magic.session import Answer, Session
from ehr_magic.session import variables as notebook

if TYPE_CHECKING:  # pragma: no cover
    from IPython.core.interactiveshell import InteractiveShell

HELP = """%%ehr [--model M] [--steps T] [--shots K] [--knowledge separate|inline|off] [--as NAME]
      [--no-run] [--regenerate] [--quiet]
  <question>              answer the question with code inserted as a new cell below; a follow-up
                          ("now only the emergency ones") reads against the earlier questions, and
                          notebook variables the question names (`cohort`) are described to the model

%ehr connect PATH|demo|synthetic [--patients N]   connect `ehr` to a database
%ehr status                                       database, clock, model, memory
%ehr config [KEY [VALUE]] [--save]                show or set model, base_url, steps, shots, knowledge,
                                                  timeout, memory; --save writes model/base_url to config.toml
%ehr memory list|search TEXT|show ID|delete ID    this dataset's memory, each entry with its origin
%ehr knowledge [TABLE]                            what ehr-magic believes about the data: clock, tables,
                                                  keys, joins, lookup columns (drafted or confirmed)
%ehr knowledge edit [PATH] | import FILE          write the knowledge file to edit; check and store it
%ehr history                                      the current conversation (questions, answers, variables)
%ehr new                                          start a new conversation (follow-ups stop referring back)
%ehr skill list|show NAME|delete NAME             clinical skills (built-in and your own)
%ehr skill save NAME [PARAM=LITERAL ...]          the last accepted cell as a reusable function whose
                                                  parameters replace the given literals
%ehr help                                         this text
Run an inserted cell (edited or not) to accept it into memory."""

_CONFIG_KEYS = ("model", "base_url", "steps", "shots", "knowledge", "timeout", "memory", "store", "run_mode",
                "privacy")


@magics_class
class EhrMagics(Magics, Configurable):
    model = Unicode(None, allow_none=True, config=True,
                    help="Model name; overrides the config file and EHR_MAGIC_MODEL.")
    base_url = Unicode(None, allow_none=True, config=True, help="Base URL of an OpenAI-compatible server.")
    steps = Integer(10, config=True, help="Most code attempts per question (EHRAgent's T).")
    shots = Integer(4, config=True, help="Few-shot examples taken from memory (EHRAgent's K).")
    knowledge: Enum[KnowledgeMode] = Enum(["separate", "inline", "off"], "inline", config=True,
                                          help="Knowledge integration mode.")
    timeout = Float(60.0, config=True, help="Seconds one run of generated code may take.")
    memory = Unicode(None, allow_none=True, config=True,
                     help="Memory file (default: EHR_MAGIC_MEMORY or the user data dir).")
    store = Enum(["accepted", "auto"], "accepted", config=True,
                 help="What memory keeps: only cells the analyst accepted, or also every successful answer.")
    database = Unicode(None, allow_none=True, config=True, help="Database to connect at load time (default: demo).")
    show_progress = Bool(True, config=True, help="Show live progress while the assistant works.")
    run_mode: Enum[RunMode] = Enum(["auto", "review", "review-if-flagged"], "auto", config=True,
                                   help="auto: run guarded code at once; review: insert it for the analyst to run; "
                                        "review-if-flagged: review only code the guard flags.")
    privacy = Enum(["schema", "aggregates", "full"], None, allow_none=True, config=True,
                   help="What the model may see of the data (default: full for open demos and synthetic data, "
                        "schema for anything else).")

    @validate("steps", "shots", "timeout")
    def _in_range(self, proposal: Any) -> Any:
        # The agent's own check, so that a value it would refuse is never kept (a --save, an observer).
        trait = proposal["trait"]
        try:
            return checked_setting(trait.name, proposal["value"])
        except ConfigError as exc:
            if getattr(self, "_configured", False):
                raise TraitError(str(exc)) from None
            # read from the IPython configuration while loading: say so and load with the default
            self._say(f"ehr-magic: {exc} The configuration's value is not used: {trait.name} = {trait.default_value}.")
            return trait.default_value

    def __init__(self, shell: InteractiveShell) -> None:
        super().__init__(shell=shell)
        Configurable.__init__(self, config=shell.config, parent=shell)
        self._configured = True  # from here on, a value out of range is refused (``_in_range``)
        self.session = Session()  # connected on first use (``_ready``)
        self.observe(self._settings_changed, names=list(_CONFIG_KEYS))

    @property
    def ipython(self) -> InteractiveShell:
        """The shell these magics serve (IPython types ``Magics.shell`` as None: it may be unset)."""
        shell: InteractiveShell | None = self.shell
        if shell is None:
            raise RuntimeError("EhrMagics is not registered with an IPython shell.")
        return shell

    # -- entry point -------------------------------------------------------------------

    @line_cell_magic
    def ehr(self, line: str, cell: str | None = None) -> None:
        """Ask a question (%%ehr, question in the cell body) or run a command (%ehr help)."""
        try:
            if cell is None:
                self._command(line)
            else:
                self._ask(command.parse_ask(line, cell))
        except CommandError as exc:
            raise UsageError(str(exc)) from None
        except EhrMagicError as exc:
            self._say(f"ehr-magic: {exc}")
        except KeyboardInterrupt:
            self._say("ehr-magic: interrupted; nothing was stored.")

    # -- %%ehr -------------------------------------------------------------------------

    def _ask(self, cmd: command.AskCommand) -> None:
        session = self._ready()
        settings = AgentSettings(max_steps=cmd.steps or self.steps,
                                 shots=self.shots if cmd.shots is None else cmd.shots,
                                 knowledge=cmd.knowledge or self.knowledge, timeout=self.timeout,
                                 privacy=self.privacy, run_mode="review" if cmd.review else self.run_mode)
        progress = _Progress(enabled=self.show_progress and not cmd.quiet)
        try:
            answer = session.ask_in_notebook(cmd.question, variables=self.user_variables(),
                                             regenerate=cmd.regenerate, execute=not cmd.no_run, model=cmd.model,
                                             settings=settings, on_event=progress.on_event)
        except KeyboardInterrupt:
            progress.close()
            self._say("ehr-magic: interrupted; nothing was stored.")
            return
        except EhrMagicError as exc:
            progress.close()
            self._say(f"ehr-magic: {exc}")
            return
        progress.close()
        for note in answer.notes:
            self._say(f"ehr-magic: {note}")
        offered = answer.offered
        assert offered is not None, "ask_in_notebook always offers a cell"
        if offered.token is None:
            if answer.source == "session":  # the question could not be read: one sentence, nothing to show
                self._say(f"ehr-magic: {answer.message}")
                return
            display({"text/plain": render.failure_text(answer), "text/html": render.failure_html(answer)}, raw=True)
            return
        token = offered.token
        model = answer.result.model if answer.result else ""
        if offered.insert:
            self.ipython.set_next_input(offered.cell, replace=False)
        if answer.status == "generated":
            reason = "--no-run" if cmd.no_run else answer.message or "review"
            self._say(f"ehr-magic: code inserted below, not run ({reason}). Read it, then run the cell to execute "
                      "and accept it.")
            return
        self._bind(answer, cmd.as_name)
        display({"text/plain": render.answer_text(answer.answer), "text/html": render.answer_html(answer.answer)},
                raw=True)
        if answer.source == "agent" and answer.message:  # "None found: the code searched ..."
            self._say(f"ehr-magic: {answer.message}")
        _show_figures()
        if not cmd.quiet:
            if answer.source == "memory":
                display({"text/plain": answer.message, "text/html": render.details_html(answer, model)}, raw=True)
            else:
                display({"text/plain": render.details_text(answer), "text/html": render.details_html(answer, model)},
                        raw=True)
            from ehr_magic.magic.widgets import review_buttons

            review_buttons(self, token)

    def _bind(self, answer: Answer, as_name: str | None) -> None:
        skip = self.session.code_names()  # what every cell's code has already: ehr, pl, skills...
        values = {k: v for k, v in answer.namespace.items() if k not in skip and not k.startswith("_")}
        values["answer"] = answer.answer
        if as_name:
            values[as_name] = answer.answer
        self.ipython.user_ns.update(values)

    # -- %ehr commands -----------------------------------------------------------------

    def _command(self, line: str) -> None:
        words = command.split_line(line)
        if not words or words[0] in ("help", "-h", "--help"):
            print(HELP)
            return
        name, args = words[0], words[1:]
        handler = getattr(self, f"_cmd_{name}", None)
        if handler is None:
            raise CommandError(f"Unknown command {name!r}; try %ehr help.")
        handler(args)

    def _cmd_connect(self, args: list[str]) -> None:
        if not args:
            raise CommandError("Usage: %ehr connect PATH|demo|synthetic [--patients N]")
        patients = 100
        if "--patients" in args:
            i = args.index("--patients")
            try:
                patients = int(args[i + 1])
            except (IndexError, ValueError):
                raise CommandError("--patients needs a whole number, e.g. --patients 500.") from None
            args = args[:i] + args[i + 2:]
        line = _ProgressLine(enabled=self.show_progress)
        try:
            description = self.session.connect(args[0], patients=patients, say=self._say, progress=line)
        finally:
            line.close()
        self._publish()
        self._say(description)

    def _cmd_status(self, args: list[str]) -> None:
        s = self.session
        lines = [s.description or "ehr: not connected (%ehr connect demo)"]
        try:
            settings = s.llm().settings if s.ehr is not None else None
            lines.append(f"model: {settings.model} at {settings.endpoint}" if settings else "model: -")
        except EhrMagicError as exc:
            lines.append(f"model: {exc}")
        if s.memory is not None:
            stats = s.memory.stats()
            mine = stats.by_schema.get(s.ehr.schema, 0) if s.ehr else 0
            lines.append(f"memory: {stats.path}: {stats.total} entries, {mine} for this schema")
        level = s.privacy_level() or "-"
        lines.append(f"privacy: {level} (what the model may see); run mode: {self.run_mode}")
        lines.append(f"settings: steps {self.steps}, shots {self.shots}, knowledge {self.knowledge}, "
                     f"timeout {self.timeout:g} s, store {self.store}")
        print("\n".join(lines))

    def _cmd_config(self, args: list[str]) -> None:
        save = "--save" in args
        args = [a for a in args if a != "--save"]
        if not args:
            print("\n".join(f"{k} = {getattr(self, k)!r}" for k in _CONFIG_KEYS))
            return
        key = args[0]
        if key not in _CONFIG_KEYS:
            raise CommandError(f"Unknown setting {key!r}; settings: {', '.join(_CONFIG_KEYS)}.")
        if len(args) == 1:
            print(f"{key} = {getattr(self, key)!r}")
            return
        value: Any = " ".join(args[1:])
        try:
            trait = self.traits()[key]
            value = trait.from_string(value) if hasattr(trait, "from_string") else value
            setattr(self, key, value)
        except (TraitError, ValueError) as exc:  # traitlets refuses the value, or cannot read it
            said = str(exc)  # the agent's range check names the setting itself
            raise CommandError(said if said.startswith(f"{key} must") else f"Invalid value for {key}: {said}") from None
        if save:
            if key not in ("model", "base_url"):
                raise CommandError("Only model and base_url can be saved to the config file.")
            from ehr_magic.llm import save_setting

            path = save_setting(key, value)
            print(f"{key} = {value!r} (saved to {path})")
        else:
            print(f"{key} = {value!r}")

    def _cmd_memory(self, args: list[str]) -> None:
        s = self._ready()
        action = args[0] if args else "list"
        schema = s.database.schema
        if action == "list":
            entries = s.remembered(limit=50)
            for e in entries:
                print(f"#{e.id:<5} {e.origin:<9} used {e.use_count:<3} {e.question}")
            print(f"({len(entries)} shown; schema {schema})")
        elif action == "search" and len(args) > 1:
            for e in s.remembered(" ".join(args[1:]), limit=10):
                print(f"#{e.id:<5} {e.score:6.1f} {e.origin:<9} {e.question}")
        elif action in ("show", "delete") and len(args) == 2 and args[1].lstrip("#").isdigit():
            entry_id = int(args[1].lstrip("#"))
            if action == "show":
                e = s.memory.get(entry_id)
                print(f"#{e.id} ({e.origin}, {e.schema}, used {e.use_count}x)\nquestion: {e.question}\n"
                      f"knowledge:\n{e.knowledge}\ncode:\n{e.code}")
                if e.generated_code:
                    print(f"generated code (before the analyst's edit):\n{e.generated_code}")
            else:
                s.memory.delete(entry_id)
                print(f"deleted #{entry_id}")
        else:
            raise CommandError("Usage: %ehr memory list | search TEXT | show ID | delete ID")

    def _cmd_skill(self, args: list[str]) -> None:
        from ehr_magic import skills
        from ehr_magic.skills import user

        action = args[0] if args else "list"
        if action == "list":
            # Only what runs on the connected database (all skills before a connection).
            schema = self.session.ehr.schema if self.session.ehr is not None else None
            for card in skills.catalog(schema=schema):
                print(f"{card.name:<28} {card.kind:<10} {card.title}")
        elif action == "show" and len(args) == 2:
            print(skills.card(args[1]))
        elif action == "delete" and len(args) == 2:
            user.delete_skill(args[1])
            print(f"deleted user skill {args[1]}")
        elif action == "save" and len(args) >= 2:
            self._save_skill(args[1], args[2:])
        else:
            raise CommandError("Usage: %ehr skill list | show NAME | delete NAME | save NAME [PARAM=LITERAL ...]")

    def _save_skill(self, name: str, assignments: list[str]) -> None:
        """The last accepted cell -> a user skill with the named literals as parameters."""
        import ast

        from ehr_magic.agent.steps import to_json_value
        from ehr_magic.skills import user

        session = self._ready()
        accepted = session.cells.last_accepted
        if accepted is None:
            raise CommandError("No accepted cell yet: run an inserted cell (or press Accept) first.")
        question, code = accepted
        params: dict[str, Any] = {}
        for assignment in assignments:
            key, _, literal = assignment.partition("=")
            if not key.isidentifier() or not literal:
                raise CommandError(f"Write parameters as NAME=LITERAL (e.g. subject_id=10004235), not {assignment!r}.")
            try:
                params[key] = ast.literal_eval(literal)
            except (ValueError, SyntaxError):
                params[key] = literal
        if not params:
            found = [lit["value"] for lit in user.find_literals(code)
                     if not isinstance(lit["value"], str) or lit["in_string"]]
            print(f"Literals in the cell you can turn into parameters: {found[:12]}")
        value = self.ipython.user_ns.get("answer")
        expected = to_json_value(value)
        tests = [{"params": dict(params), "expected": expected if not isinstance(expected, list) else
                  [dict(zip(value.columns, row)) for row in expected[:20]] if hasattr(value, "columns") else expected}]
        card = {"title": name.replace("_", " "), "purpose": question,
                "inputs": ", ".join(f"{k} (default {v!r})" for k, v in params.items()) or "none",
                "output": "the value the accepted cell computed (`answer`)",
                "interpretation": "as in the accepted cell", "source": "accepted cell: " + question}
        saved = user.save_skill(name, code, card=card, params=params, tests=tests, schema=session.database.schema,
                                verify_with=session.database)
        print(f"Saved user skill {saved.name} v{saved.version}: skills.{saved.name}(ehr"
              + "".join(f", {k}=..." for k in params) + ")")

    def _cmd_knowledge(self, args: list[str]) -> None:
        from ehr_magic.magic import knowledge

        knowledge.run(self, args)

    def import_knowledge(self, path: str | None) -> str:
        """Check and store a knowledge file, reconnect, and rebind the notebook's ``ehr``
        (``%ehr knowledge import`` and the side panel's Import)."""
        message = self._ready().import_knowledge(path)
        self._publish()
        return message

    def _cmd_history(self, args: list[str]) -> None:
        print(self.session.conversation.text())

    def _cmd_new(self, args: list[str]) -> None:
        self.session.new_conversation()
        print("ehr-magic: new conversation; the next question stands alone.")

    # -- helpers -----------------------------------------------------------------------

    def _ready(self) -> Session:
        if self.session.ehr is None:
            line = _ProgressLine(enabled=self.show_progress)
            try:
                self.session.connect(self.database or default_target(), say=self._say, progress=line)
            finally:
                line.close()
            self._publish()
        if self.session.memory is None:
            self.session.use_memory(self.memory)
        self._settings_changed()
        return self.session

    def _publish(self) -> None:
        """Bind ``ehr`` and the clinical ``skills`` in the user's namespace, as generated code sees them."""
        from ehr_magic import skills

        self.ipython.user_ns["ehr"] = self.session.ehr
        self.ipython.user_ns.update(skills.namespace(self.session.database))

    def _settings_changed(self, change: Any = None) -> None:
        if change is not None and change["name"] == "memory" and self.session.memory is not None:
            self.session.use_memory(self.memory)
        session = self.session
        session.llm_overrides = {"model": self.model, "base_url": self.base_url}
        session.settings = AgentSettings(max_steps=self.steps, shots=self.shots, knowledge=self.knowledge,
                                         timeout=self.timeout, privacy=self.privacy, run_mode=self.run_mode)
        session.store_auto = self.store == "auto"

    def user_variables(self) -> dict[str, Any]:
        """The analyst's own variables in the kernel (``ehr_magic.session.variables.analyst_variables``)."""
        return notebook.analyst_variables(self.ipython.user_ns, getattr(self.ipython, "user_ns_hidden", {}))

    @staticmethod
    def _say(text: str) -> None:
        print(text)


def _show_figures() -> None:
    """Show the charts the code drew now, above the details and buttons."""
    import sys

    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for number in pyplot.get_fignums():
        display(pyplot.figure(number))
    pyplot.close("all")


class _ProgressLine:
    """One line updated in place while connecting (building the demo, drafting knowledge),
    at most a few times a second; cleared when done."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.handle: DisplayHandle | None = None
        self._last = 0.0

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.enabled or time.monotonic() - self._last < 0.2:
            return
        self._last = time.monotonic()
        text = f"ehr-magic: {phase}" + (f" ({done}/{total})" if total else "")
        if self.handle is None:
            self.handle = display({"text/plain": text}, raw=True, display_id=True)
        else:
            self.handle.update({"text/plain": text}, raw=True)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.update({"text/plain": ""}, raw=True)


class _Progress:
    """Live progress in one display area: phases with elapsed time, streamed code."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.lines: list[str] = []
        self.streamed = ""
        self.handle: DisplayHandle | None = None
        self._last = 0.0

    def on_event(self, event: Event) -> None:
        if not self.enabled:
            return
        if event.kind == "phase":
            self.lines.append(render.phase_line(event.phase, event.detail, event.elapsed))
            if event.phase == "code":
                self.streamed = ""
        elif event.kind == "token":
            self.streamed += event.detail
            if time.monotonic() - self._last < 0.15:  # redraw at most ~7 times a second
                return
        elif event.kind == "step" and event.step is not None and not event.step.succeeded:
            self.lines.append("        " + event.step.line())
        else:
            return
        self._draw()

    def _draw(self) -> None:
        self._last = time.monotonic()
        view = HTML(render.progress_html(self.lines, self.streamed))
        if self.handle is None:
            self.handle = display(view, display_id=True)
        else:
            self.handle.update(view)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.update(HTML(render.progress_html(self.lines[-1:])))
