"""The session: the one answering path (memory -> reuse -> agent) and the conversation.

Every front end (``%%ehr``, the side panel, ``ehr-magic ask``/``chat``/``eval``) asks
through a ``Session``; nothing else in the package constructs an ``Agent``.
"""

from ehr_magic.session.answer import Answer
from ehr_magic.session.conversation import Conversation, Turn, looks_like_follow_up
from ehr_magic.session.core import MODES, Session

__all__ = ["MODES", "Answer", "Conversation", "Session", "Turn", "looks_like_follow_up"]
