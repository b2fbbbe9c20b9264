"""Ctrl-C while ehr-magic waits for the model, in a fresh process (see tests/test_interrupts.py).

    python press_stop.py client STREAM        # LLMClient.chat, stream "1" or "0"
    python press_stop.py magic DB MEMORY      # %%ehr in an IPython shell

The fake model server answers after ``REPLY_DELAY`` s; SIGINT reaches the main thread once the
request is in flight. Prints what happened, one line per fact, for the test to read: ``seconds``
is the time from the stop to the return, so a loaded machine's slow start does not count.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fake server
from fake_llm import FakeLLMServer, FakeReply

REPLY_DELAY = 60  # far longer than any stop takes, so a stop that waited for the reply is plain
server = FakeLLMServer().start()
stopped_at: list[float] = []
os.environ.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test-key", EHR_MAGIC_MODEL="fake-model")


def press_stop_once_asked() -> None:
    for _ in range(400):
        if server.requests:
            break
        time.sleep(0.05)
    time.sleep(0.3)
    stopped_at.append(time.monotonic())
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


def client(stream: bool) -> None:
    from ehr_magic.llm import LLMClient, resolve_settings

    server.enqueue(FakeReply(text="never", delay=REPLY_DELAY))
    llm = LLMClient(resolve_settings())
    threading.Thread(target=press_stop_once_asked, daemon=True).start()
    try:
        llm.chat([{"role": "user", "content": "hello"}], stream=stream)
        print("returned")
    except KeyboardInterrupt:
        print("interrupted")
    print(f"seconds {time.monotonic() - stopped_at[0]:.2f}")
    print(f"audit {llm.audit.entries()[-1].status}")


def magic(db: str, memory: str) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    os.environ.update(EHR_MAGIC_DB=db, EHR_MAGIC_MEMORY=memory)
    shell = InteractiveShell()
    shell.history_manager.enabled = False
    shell.run_line_magic("load_ext", "ehr_magic")
    server.enqueue(FakeReply(text="```python\nanswer = 1\n```", delay=REPLY_DELAY))
    threading.Thread(target=press_stop_once_asked, daemon=True).start()
    result = shell.run_cell("%%ehr\nSlow question?")
    print(f"success {result.success}")
    print(f"seconds {time.monotonic() - stopped_at[0]:.2f}")
    server.enqueue("```python\nanswer = ehr.sql('SELECT 2').item()\n```")
    shell.run_cell("%%ehr\nNext question?")
    print(f"next {shell.user_ns.get('answer')}")


if __name__ == "__main__":
    if sys.argv[1] == "client":
        client(sys.argv[2] == "1")
    else:
        magic(sys.argv[2], sys.argv[3])
    server.stop()
