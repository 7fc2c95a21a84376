"""Configuration for every process of the engine, read from the environment.

The Temporal connection follows Temporal's own environment configuration
(``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS*``,
``TEMPORAL_PROFILE`` and the TOML config file), so a deployment that already talks to a
cluster through the ``temporal`` CLI needs nothing new. Everything the engine adds on top
is an ``AGUI_*`` variable declared on :class:`Settings`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import sqlite3
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfig
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    MetricBuffer,
    PrometheusConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)

import codec
import tracing
from logs import LogFormat

DEFAULT_TEMPORAL_ADDRESS = "localhost:7233"
EMBEDDED_SQLITE_PRAGMAS = ("journal_mode=wal",)
"""The SQLite pragmas of ``make run``'s embedded Temporal server (and of the tests that
restart one on a file, so they check what ``make run`` does). WAL commits by appending
instead of rewriting pages through a rollback journal; ``synchronous`` stays at SQLite's
default, FULL, on purpose: ``docs/operations.md``, "Storage settings of the embedded
server"."""
EMBEDDED_DYNAMIC_CONFIG: dict[str, object] = {
    "system.enableSuggestCaNOnNewTargetVersion": True,
    "history.transferProcessorMaxPollRPS": 1000,
    "system.forceSearchAttributesCacheRefreshOnRead": False,
    "history.workflowIdReuseMinimalInterval": "0s",
}
"""The dynamic config of the embedded Temporal server (and of the tests' servers).

- With Worker Versioning, tell a thread pinned to its build that its deployment's
  current build changed, so that it moves to it at its next rest
  (``AGUI_WORKER_DEPLOYMENT``).
- Read the transfer queue (the tasks that hand a new workflow's first workflow task, or
  the one after an activity, to matching) as soon as it has tasks, not at most 20 times
  a second: the dev server has one history shard, so at the default every such hand-off
  waited for the shard's next read, ~25 ms on average (``docs/operations.md``, "Storage
  settings of the embedded server").
- Keep the search attributes' definitions in memory, Temporal's default: the CLI's dev
  server otherwise reads them from its SQLite file at each use, about thirty reads per
  interrupt cycle. A newly registered attribute then takes up to the namespace cache's
  refresh interval (2 s) to be usable, which ``worker.ensure_search_attributes`` waits
  for.
- Start a thread's next workflow run at once when it continues as new. Temporal holds a
  continued run's first workflow task until a second after its predecessor started
  (``history.workflowIdReuseMinimalInterval``, a guard against workflows that continue
  as new in a loop), and unversioned, a thread continues as new after every run: a read
  of it (a query, which needs the new run's first task done) within a second of its last
  start waited for the rest of that second (a resume within it now costs a workflow
  task more: ``docs/bench.md``). A thread continues as new only after a run,
  when told to move to another build, or when its history has grown long
  (``ThreadWorkflow._should_continue_as_new``): a workflow run that has just started
  meets none of these, so a thread cannot loop."""


def embedded_server_flags(
    on_file: bool = True, dynamic_config: Mapping[str, object] | None = None
) -> list[str]:
    """``temporal server start-dev``'s flags for the embedded server's dynamic config (with
    ``dynamic_config`` on top) and, ``on_file``, its SQLite pragmas."""
    flags = [
        flag
        for key, value in {**EMBEDDED_DYNAMIC_CONFIG, **(dynamic_config or {})}.items()
        for flag in ("--dynamic-config-value", f"{key}={json.dumps(value)}")
    ]
    if on_file:
        flags += [f for pragma in EMBEDDED_SQLITE_PRAGMAS for f in ("--sqlite-pragma", pragma)]
    return flags


EMBEDDED_QUERIED_COLUMNS = frozenset(
    {
        # What Temporal's list views and filters (the Web UI's, `temporal workflow list`'s)
        # and the engine's own queries (besides its search attributes) ask for.
        "execution_time",
        "workflow_id",
        "workflow_type_name",
        "status",
        "task_queue",
        "parent_workflow_id",
        "parent_run_id",
        "root_workflow_id",
        "root_run_id",
        # What Temporal's features on this server list by: schedules, batch jobs, Worker
        # Deployments, paused activities.
        "TemporalNamespaceDivision",
        "TemporalScheduledById",
        "TemporalScheduledStartTime",
        "TemporalSchedulePaused",
        "BatcherUser",
        "TemporalWorkerDeployment",
        "TemporalWorkerDeploymentVersion",
        "TemporalWorkflowVersioningBehavior",
        "TemporalPauseInfo",
    }
)
"""The embedded server's visibility columns that keep their indexes, besides those of the
namespace's custom search attributes (:func:`fit_embedded_visibility_indexes`)."""
EMBEDDED_INDEXED_COLUMN = re.compile(r"\(namespace_id, (\w+),")
"""The column of one of the visibility table's indexes on one column, in its SQL."""
_UNINDEXED_KEY = "(namespace_id, "
"""Where the visibility table's default index (``default_idx``, on no column) names its
key, before which an index of a column names the column."""


async def fit_embedded_visibility_indexes(
    client: Client, database: Path
) -> tuple[list[str], list[str]]:
    """Keep the embedded server's visibility indexes to those queries use: drop the others,
    index custom search attributes that have none. Return the names dropped and created.

    Temporal's SQLite visibility table has an index on each of its ~60 columns, and its
    store writes a workflow's record whole whenever its status or search attributes
    change, so each such write rewrites every index: most of a visibility write's cost,
    four times per interrupt cycle (``docs/bench.md``, "The embedded server's visibility
    indexes"). The indexes kept are those of :data:`EMBEDDED_QUERIED_COLUMNS` and of the
    columns that hold the namespace's custom search attributes (the engine's, and any an
    operator registered since: each gets an index like Temporal's own, the next time this
    runs).
    A query on another column still answers, reading the table instead of an index. The
    dev server sets up its schema only when it creates the file and never migrates it,
    so nothing it does brings a dropped index back.
    """
    described = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=client.namespace)
    )
    attributes = set(described.config.custom_search_attribute_aliases)
    kept = EMBEDDED_QUERIED_COLUMNS | attributes
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as db:
        indexes = dict(
            db.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index'"
                " AND tbl_name = 'executions_visibility' AND sql IS NOT NULL"
            ).fetchall()
        )
        columns = {
            name: found[1]
            for name, sql in indexes.items()
            if (found := EMBEDDED_INDEXED_COLUMN.search(sql))
        }
        dropped = sorted(name for name, column in columns.items() if column not in kept)
        # Lists (keyword lists, text) are searched through full-text tables, not indexes.
        missing = sorted(
            column
            for column in attributes - set(columns.values())
            if not column.startswith(("KeywordList", "Text"))
        )
        created = [f"by_{column.lower()}" for column in missing]
        for name in dropped:
            with db:
                db.execute(f'DROP INDEX "{name}"')
        for name, column in zip(created, missing, strict=True):
            sql = indexes["default_idx"].replace("default_idx", name, 1)
            with db:
                db.execute(sql.replace(_UNINDEXED_KEY, f"{_UNINDEXED_KEY}{column}, ", 1))
    return dropped, created


MAX_BODY_BYTES = 1024 * 1024
"""The default cap on a request body: 1 MiB, a long conversation resent whole."""
MAX_STREAMS_PER_PRINCIPAL = 32
"""The default cap on one principal's open event streams on one gateway replica: room
for a busy client (``make bench`` runs 16 at once, the crash tests 20) with headroom,
since a finished stream gives its slot back a moment after its client has read it."""
RUN_COMPRESS_FROM = 16 * 1024
"""``AGUI_COMPRESS_PAYLOADS_FROM`` as ``make run`` (once no earlier build runs) and the
bench's stacks set it: what a turn adds stays as it is, what a long thread carries
across a continue-as-new, or a model call's conversation, is compressed."""
CONTINUE_AS_NEW_AFTER_RUNS = 1
"""The default: a thread continues as new after every run, so between runs (waiting on
interrupts for days, or idle) its workflow history holds only data, the carried
``ThreadState``, and replays no agent code. A deploy that changes an agent, its
policies or the engine can then never make a waiting thread's replay diverge
(``docs/operations.md``). Under Worker Versioning (``AGUI_WORKER_DEPLOYMENT``), which
pins a thread to its build, the bound does not apply."""


class Settings(BaseSettings):
    """The engine's own settings; each field is read from ``AGUI_<FIELD>``."""

    model_config = SettingsConfigDict(
        env_prefix="AGUI_",
        env_ignore_empty=True,
        frozen=True,
        # A malformed secret (``payload_keys`` above all) must not be quoted back by its
        # validation error, which would put it in a crashed process's log.
        hide_input_in_errors=True,
        # Secrets may also come as files named for their variable (``agui_payload_keys``)
        # in this directory, such as Docker's and Kubernetes' ``/run/secrets``.
        secrets_dir=os.environ.get("AGUI_SECRETS_DIR"),
    )

    task_queue: str = "agui-threads"
    """Task queue the thread workflows and their activities run on."""
    gateway_host: str = "127.0.0.1"
    gateway_port: int = 8000
    gateway_shutdown_seconds: int = Field(default=5, ge=0)
    """On SIGTERM, how long the gateway lets open streams go on before it closes them and
    exits. A follower's stream, or a reconnect's waiting on a long tool, would otherwise
    keep it from stopping at all; a run goes on in Temporal, and its client reads the
    rest from any gateway (``Last-Event-ID``) or sends the same request again."""
    temporal_port: int = 7233
    """``make run``: the frontend (gRPC) port of the Temporal dev server it starts when
    ``TEMPORAL_ADDRESS`` is unset."""
    temporal_ui_port: int = 8233
    """``make run``: that dev server's Web UI port."""
    stream_poll_seconds: float = 0.05
    """How often the gateway reads a stream's new events while they flow; once a read
    brings none, it reads again when the thread's workflow has completed a workflow task,
    which a long poll of its history reports (``gateway/streaming.py``)."""
    stream_first_read_seconds: float = Field(default=0.15, gt=0)
    """How long after a run was accepted the gateway first reads its events, if it has not
    ended by then, at least: a run that waited to be accepted is first read later
    (``gateway.streaming.first_read_seconds``). A run that ends sooner (an approval that
    runs a quick tool, a turn that asks at once) arrives whole with its result, for no
    query; a longer one is read from then on as ``stream_poll_seconds`` says. On a
    saturated stack most runs outlast one poll interval but not this, and a query each is
    a sizeable share of their CPU (``docs/bench.md``, "A run's first read")."""
    accept_seconds: float = Field(default=30.0, gt=0)
    """How long the gateway waits for a thread's workflow to take a run or a decision (a
    worker to accept the update) before it answers 503 ``THREAD_UNAVAILABLE``: when no
    worker serves the thread (none runs, or under Worker Versioning none of its build),
    a client is told so instead of waiting for ever. Temporal keeps the request; sent
    again, the same run finds it, taken or not."""
    follow_poll_seconds: float = Field(default=1.0, gt=0)
    """How often a stream following a thread (``GET /threads/{id}/events``) reads it
    while no run is in progress, where Temporal refuses the gateway's long poll of the
    thread's history (otherwise the history says when to read)."""
    continue_as_new_after_runs: int = CONTINUE_AS_NEW_AFTER_RUNS
    """Runs a thread's workflow run serves on unversioned workers before it continues as
    new (set at a thread's first run and kept for its life)."""
    worker_deployment: str | None = None
    """Worker: the Temporal Worker Deployment its workers belong to, which turns on Worker
    Versioning: each thread is pinned to the build (``worker_build_id``) that started
    its workflow run, and continues as new only to move to a newer build or when
    Temporal suggests it, not after every run (``docs/operations.md``, "Deploying with
    Worker Versioning"). Unset, threads continue as new after every run
    (``continue_as_new_after_runs``)."""
    worker_build_id: str | None = None
    """Worker: this build's id within ``worker_deployment`` (required with it): one per
    release of the worker's code, such as its image tag or commit."""
    healthz_timeout_seconds: float = 2.0
    worker_shutdown_seconds: float = 30.0
    """How long a stopping worker lets running activities finish before cancelling them."""
    worker_sticky_queue_seconds: float = Field(default=10.0, gt=0)
    """How long a thread's next workflow task waits for the worker that has the thread
    cached (Temporal's sticky queue) before any worker may take it, replaying the
    history: after a worker dies, its threads' next steps wait this long. Temporal's
    default."""
    reminder_webhook_url: str | None = None
    """Where reminders before an interrupt's deadline are posted (JSON); unset or empty,
    none are."""
    demo_mail_url: str | None = None
    """Where the demo agent's ``send_email`` posts emails (JSON); unset, sending is simulated."""
    log_format: LogFormat = "text"
    """``json`` for one JSON object per line, with thread and run ids (``logs.py``)."""
    gateway_gc_threshold: int = Field(default=50_000, gt=0)
    """Gateway: net allocations of container objects between two collections of Python's
    young generation (``gateway/collector.py``); 700 is CPython's default."""
    metrics_bind_address: str | None = None
    """Worker: ``host:port`` where it serves Prometheus metrics (the Temporal SDK's and
    the workflows' own, e.g. ``agui_interrupts_opened_total``); unset, none. The gateway
    always serves its metrics at ``GET /metrics``."""
    webhook_timeout_seconds: float = 10.0
    """How long one webhook or mail delivery attempt may take before it is retried."""
    openai_base_url: str | None = None
    """Worker: the OpenAI-compatible chat-completions server of ``OpenAIModel``s that
    name none (``https://api.openai.com/v1`` when unset)."""
    openai_model: str = "gpt-4o-mini"
    """Worker: the model ``OpenAIModel``s that name none ask for."""
    openai_api_key: str | None = None
    """Worker: the API key for that server (``OPENAI_API_KEY`` when unset)."""
    auth_jwks_url: str | None = None
    """Gateway: the OIDC provider's JWKS, whose keys (RS256/ES256) sign clients' tokens."""
    auth_issuer: str | None = None
    """Gateway: the tokens' required ``iss`` (required with ``auth_jwks_url``)."""
    auth_audience: str | None = None
    """Gateway: the tokens' required ``aud`` (required with ``auth_jwks_url``)."""
    auth_hs256_secret: SecretStr | None = None
    """Gateway: a shared secret signing clients' tokens (HS256), instead of a provider."""
    auth_groups_claim: str = "groups"
    """Gateway: the claim listing the principal's groups."""
    auth_admin_group: str = "agui-admins"
    """Gateway: members may read and list every thread."""
    auth_anonymous: bool = False
    """Gateway: with no way to verify tokens configured, let requests in without one,
    all as ``anonymous``. For local experiments only; the gateway warns at start."""
    oidc_issuer: str | None = None
    """Gateway: the OIDC provider people sign in to the inbox page with (its issuer URL,
    whose ``/.well-known/openid-configuration`` it reads); with ``oidc_client_id``."""
    oidc_client_id: str | None = None
    """Gateway: the inbox page's client id at that provider."""
    oidc_client_secret: SecretStr | None = None
    """Gateway: that client's secret; unset for a public client (PKCE alone)."""
    oidc_scopes: str = "openid profile"
    """Gateway: the scopes the sign-in asks for; the ID token must carry the principal's
    groups in ``auth_groups_claim`` (add the provider's groups scope here if it needs one)."""
    public_url: str | None = None
    """Gateway: the address browsers reach it at (``https://agents.example.com``), for the
    sign-in's redirect URI and ``Secure`` cookies; unset, the request's own address."""
    session_secret: SecretStr | None = None
    """Gateway: the key signing the inbox page's session cookies (at least 32 characters),
    the same on every replica; unset, each gateway process makes its own, so sessions end
    when it restarts."""
    session_ttl_seconds: int = Field(default=8 * 3600, ge=60)
    """Gateway: how long an inbox sign-in lasts."""
    inbox_dev_signin: bool = False
    """Gateway: let anyone sign in to the inbox page as any user and groups they type, for
    development (``make run`` with its development secret turns it on). Never in production."""
    max_body_bytes: int = Field(default=MAX_BODY_BYTES, ge=1)
    """Gateway: the largest request body it reads; a larger one is a 413."""
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    """Gateway: the host names (comma-separated, no ports) requests may name in their
    ``Host`` header; empty, any. ``GET /healthz`` is exempt, for probes by address."""
    cors_origins: Annotated[tuple[str, ...], NoDecode] = ()
    """Gateway: the origins (comma-separated, e.g. ``https://app.example.com``) whose
    browser pages may call it; empty, none (no CORS headers at all)."""
    max_streams_per_principal: int = Field(default=MAX_STREAMS_PER_PRINCIPAL, ge=1)
    """Gateway: how many event streams (runs in flight, queued runs and attached
    readers alike) one principal may hold open on one gateway replica."""

    payload_keys: SecretStr | None = None
    """Every process: the keys encrypting what threads store in Temporal (``codec.py``),
    as ``<id>:<base64 of 32 random bytes>`` pairs, comma-separated; the first encrypts,
    all decrypt. Every process of a deployment needs the same keys. Unset, nothing is
    encrypted."""
    compress_payloads_from: int | None = Field(default=None, ge=1)
    """Every process: payloads of at least this many bytes are stored compressed
    (``codec.py``). Every process reads compressed payloads whether it is set or not;
    set it only once no process of the deployment runs code older than that
    (``docs/operations.md``, "Compressing large payloads"). Unset, nothing is
    compressed."""
    codec_group: str | None = None
    """Gateway: members of this group may use the codec server (``/codec``), which
    decrypts any thread's payloads, besides ``auth_admin_group``'s; unset, admins only."""
    codec_origins: Annotated[tuple[str, ...], NoDecode] = ()
    """Gateway: the Temporal Web UI's origins (comma-separated) whose pages may call the
    codec server; empty, none."""
    thread_retention: timedelta | None = None
    """Worker: threads idle longer than this (no run, no decision) are deleted, with
    their histories; unset, never. Seconds, or ISO 8601 such as ``P30D``."""
    retention_sweep_interval: timedelta = Field(default=timedelta(hours=1), gt=timedelta(0))
    """Worker: how often threads idle longer than ``thread_retention`` are looked for."""

    @field_validator("payload_keys")
    @classmethod
    def _parses(cls, value: SecretStr | None) -> SecretStr | None:
        """Malformed keys stop the process at start, not at its first payload."""
        if value is not None:
            codec.PayloadKeys.parse(value.get_secret_value())
        return value

    def data_converter(self) -> DataConverter:
        """The engine's data converter, encrypting with ``payload_keys`` and compressing
        from ``compress_payloads_from`` bytes when set."""
        keys = self.payload_keys
        return codec.data_converter(
            codec.PayloadKeys.parse(keys.get_secret_value()) if keys else None,
            self.compress_payloads_from,
        )

    @model_validator(mode="after")
    def _build_with_deployment(self) -> Settings:
        """One without the other would run a worker unversioned that was meant to be
        pinned, or the reverse: refused at start."""
        if (self.worker_deployment is None) != (self.worker_build_id is None):
            raise ValueError("AGUI_WORKER_DEPLOYMENT and AGUI_WORKER_BUILD_ID go together")
        return self

    @field_validator("allowed_hosts", "cors_origins", "codec_origins", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        """A comma-separated variable as its items, blanks dropped."""
        if isinstance(value, str):
            return tuple(item.strip() for item in value.split(",") if item.strip())
        return value


@functools.cache
def process_settings() -> Settings:
    """The settings as this process's environment gives them, read once: for code that
    runs many times, such as activities (reading the environment costs ~0.3 ms)."""
    return Settings()


def temporal_connect_config() -> dict[str, Any]:
    """Connection arguments for :meth:`Client.connect` from Temporal's env config."""
    config: dict[str, Any] = dict(ClientConfig.load_client_connect_config())
    config.setdefault("target_host", DEFAULT_TEMPORAL_ADDRESS)
    return config


def telemetry_runtime(metrics: str | MetricBuffer | None) -> Runtime:
    """A Temporal runtime for a process of the engine.

    The SDK core's own log lines go through Python logging (logger ``temporalio.core``),
    so they come out in the process's log format. Its metrics, the SDK's (``temporal_*``)
    and those workflows emit through their metric meter, go where ``metrics`` says: a
    ``host:port`` address serves them to Prometheus at ``http://<address>/metrics``, a
    ``MetricBuffer`` holds them for the process to drain; with neither, they are dropped.
    """
    config: PrometheusConfig | MetricBuffer | None = None
    if isinstance(metrics, MetricBuffer):
        config = metrics
    elif metrics:
        config = PrometheusConfig(
            bind_address=metrics, counters_total_suffix=True, durations_as_seconds=True
        )
    return Runtime(
        telemetry=TelemetryConfig(
            logging=LoggingConfig(
                filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
            ),
            metrics=config,
        )
    )


async def connect(
    settings: Settings, *, lazy: bool = False, runtime: Runtime | None = None
) -> Client:
    """Connect to Temporal with the engine's one data converter.

    Args:
        settings: The process's settings, whose ``payload_keys`` the converter uses.
        lazy: Return at once and connect on first use, so a process can start (and report
            itself unhealthy) while Temporal is still down.
        runtime: The Temporal runtime (telemetry) to use; the default one otherwise.
    """
    return await Client.connect(
        **temporal_connect_config(),
        data_converter=settings.data_converter(),
        plugins=[tracing.plugin()] if tracing.enabled() else [],
        lazy=lazy,
        runtime=runtime,
    )
