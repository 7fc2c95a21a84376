"""What a workflow does differently under Worker Versioning (``AGUI_WORKER_DEPLOYMENT``).

A versioned worker pins the engine's workflows to its build (``worker.deployment_config``),
so a workflow run's history is only ever replayed by the code that wrote it. A workflow
moves to its deployment's current build by continuing as new at a point where it holds
only data: a thread between runs, a sub-agent between rounds.
"""

from __future__ import annotations

from temporalio import workflow

UPGRADE_SIGNAL = "upgrade"
"""The signal a deploy sends the workflows pinned to an older build: continue as new, on
the current build, at the next point that holds only data (``docs/operations.md``)."""


def versioned() -> bool:
    """The workflow task runs on a worker of a Worker Deployment."""
    version = workflow.info().get_current_deployment_version()
    # An unversioned worker has a build id (the SDK's checksum of its code) but no deployment.
    return version is not None and bool(version.deployment_name)


def next_run_behavior() -> workflow.ContinueAsNewVersioningBehavior | None:
    """How a continue-as-new starts its next run: pinned, on the current build (which may be
    this one), rather than on this run's build."""
    return workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE if versioned() else None
