"""The custom search attributes every thread workflow carries.

They let operators filter threads in the Temporal Web UI (``AguiThreadStatus =
"running"``) and list them through visibility instead of scanning. A namespace must have
them registered before a thread workflow can set them: ``worker.py`` does that at start.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

AGENT = SearchAttributeKey.for_keyword("AguiAgent")
THREAD_STATUS = SearchAttributeKey.for_keyword("AguiThreadStatus")
LAST_ACTIVITY = SearchAttributeKey.for_datetime("AguiLastActivity")

ALL = (AGENT, THREAD_STATUS, LAST_ACTIVITY)
