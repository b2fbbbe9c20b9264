"""The agent: question -> knowledge -> code -> execution -> rubber-duck debugging."""

from ehr_magic.runtime.executor import Execution, Executor
from ehr_magic.memory.fewshot import Example, ExampleSource, SeedExamples
from ehr_magic.agent.loop import SETTING_RANGES, Agent, AgentSettings, Event, checked_setting
from ehr_magic.agent.steps import ActionStep, AgentResult

__all__ = ["SETTING_RANGES", "ActionStep", "Agent", "AgentResult", "AgentSettings", "Event", "Example",
           "ExampleSource", "Execution", "Executor", "SeedExamples", "checked_setting"]
