"""Process settings, read from the environment (and an optional ``.env`` file).

Every tunable is declared once here with its unit and default.  ``DATABASE_URL`` and
``REDIS_URL`` carry no prefix (they are what every platform sets); everything else is
``SLUICE_*``.  Standalone mode needs none of them: the database defaults to a SQLite file and
Redis to an embedded server, both under ``SLUICE_DATA_DIR``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """All settings of every Sluice process; each process reads the part it needs."""

    model_config = SettingsConfigDict(env_prefix="SLUICE_", env_file=".env", extra="ignore")

    # --- storage -------------------------------------------------------------------------
    # SQLAlchemy or plain URL of the control-plane database; empty = SQLite file in data_dir.
    database_url: str = Field(
        default="", validation_alias=AliasChoices("DATABASE_URL", "SLUICE_DATABASE_URL")
    )
    # Redis URL for the data plane, change events and Celery; empty = embedded server
    # (standalone) or redis://127.0.0.1:6379/0 (other roles).
    redis_url: str = Field(
        default="", validation_alias=AliasChoices("REDIS_URL", "SLUICE_REDIS_URL")
    )
    # Local folder for the standalone SQLite file, embedded Redis and the default lake.
    data_dir: Path = Path("data")
    # Database connection pool size per process (connections).
    db_pool_size: int = 10

    # --- cluster and admin service -------------------------------------------------------
    # Name of the local cluster, like Pulsar's clusterName.
    cluster_name: str = "standalone"
    # Admin HTTP bind address and port.
    http_host: str = "0.0.0.0"
    http_port: int = 8080
    # Largest accepted request body, bytes.
    max_body_bytes: int = 1_048_576
    # Comma-separated CORS origins; empty = CORS off.
    cors_origins: str = ""
    # Seconds between outbox sweeps that publish events whose first attempt failed.
    outbox_sweep_seconds: float = 1.0
    # Stream that carries change events to the workers, and its approximate max length.
    events_stream: str = "sluice:events"
    events_stream_maxlen: int = 100_000
    # A write is answered once every live worker enforces it; a worker that has not
    # confirmed within this many seconds is fenced off (its partition leases are deleted).
    apply_timeout_seconds: float = 5.0
    # The admin service's Redis calls: a connection attempt gives up after
    # redis_connect_timeout_seconds, a reply is awaited at most redis_timeout_seconds (keep it
    # above the 1 s blocking reads of the change-event follower).  A refused connection is
    # retried once; a timeout is not.  A request that needs an unavailable Redis answers 503.
    redis_connect_timeout_seconds: float = 1.0
    redis_timeout_seconds: float = 3.0

    # --- security (Pulsar's authenticationEnabled, authorizationEnabled, superUserRoles) ----
    # Require a JWT (Authorization: Bearer) on every admin call except health and docs.
    authentication_enabled: bool = False
    # Check roles: super-users may do anything, a tenant's adminRoles manage that tenant.
    authorization_enabled: bool = False
    # Comma-separated roles with full access.
    super_user_roles: str = ""
    # Key that verifies tokens: a secret (HS256) or a public key (RS256/ES256), as a file
    # path or inline (``data:;base64,...`` or plain); set exactly one of the four.
    token_secret_key_file: str = ""
    token_secret_key: str = ""
    token_public_key_file: str = ""
    token_public_key: str = ""
    # Claim that carries the role (Pulsar's tokenAuthClaim).
    token_auth_claim: str = "sub"
    # The Redis URL the admin service gives clients that connect through it
    # (``sluice.Client("http://...")``), without credentials; empty = the admin service's own
    # Redis URL with its credentials removed.
    dataplane_url: str = ""
    # Lifetime of a client's data-plane session (its Redis ACL user) in seconds; the client
    # renews it at half-life, never past its token's expiry.
    dataplane_session_seconds: float = 300.0

    # --- broker workers -------------------------------------------------------------------
    # Unique id of this worker; empty = hostname-pid.
    worker_id: str = ""
    # Port of the worker's /metrics and /healthz endpoint (0 = off).
    worker_http_port: int = 8081
    # Address other processes reach this worker's HTTP endpoint at; empty = the hostname.
    worker_advertised_address: str = ""
    # Partition leases: a worker renews its leases and heartbeat every lease_ttl / 3; a dead
    # worker's partitions are taken over within about lease_ttl + lease_ttl / 3 seconds.
    worker_lease_ttl_seconds: float = 3.0
    # "lease" (a fleet of workers sharing partitions) or "local" (one worker owns everything).
    worker_ownership: str = "lease"
    # A partition whose stats did not change for this many seconds, and that has nothing to do
    # until a client acts, goes dormant: no runner, no per-second work (workers.dormancy).
    worker_dormant_after_seconds: float = 7.0
    # OpenTelemetry spans of dispatch calls through the global TracerProvider (workers.tracing).
    worker_tracing: bool = False
    # Seconds between full resynchronisations of policies from the database.
    worker_resync_seconds: float = 30.0
    # Connections a worker opens to Redis at most (its dispatchers wait for a free one).
    worker_redis_connections: int = 64
    # Reads (of dispatcherMaxReadBatchSize entries each) one dispatch call may make for a
    # subscription whose limits do not bind: fewer round trips at high rates.
    worker_reads_per_call: int = 4
    # Seconds between stats snapshots emitted for reporting.
    stats_interval_seconds: float = 10.0
    # A consumer that has not heartbeated for this many seconds is released (its unacked
    # messages go to other consumers).
    consumer_timeout_seconds: float = 10.0
    # Acknowledged entries (and entries of topics without subscriptions) are kept this long.
    retention_grace_seconds: float = 60.0
    # Stats snapshots kept in the Redis stream before landing (approximate max length).
    stats_stream_maxlen: int = 1_000_000

    # --- reporting ------------------------------------------------------------------------
    # Where stats snapshots land as Parquet: a folder, s3a:// or hdfs:// URL; empty = data_dir/lake.
    lake_path: str = ""
    # Spark master URL.
    spark_master: str = "local[*]"
    # Cron expression (minute hour day month weekday, UTC) for the report jobs.
    report_schedule: str = "*/15 * * * *"
    # A scheduled run finds nothing landed since the last complete run: it skips (no Spark).
    report_skip_unchanged: bool = True
    # Seconds between stats landings (snapshots from Redis into the lake).
    landing_interval_seconds: float = 60.0
    # How far back each scheduled report run recomputes its windows, seconds.
    report_lookback_seconds: float = 7200.0
    # The span the limit advisor (the advice report) looks at when a run names none, seconds.
    report_advice_lookback_seconds: float = 604800.0
    # Windows the report jobs compute, comma-separated: minute, hour, day.
    report_windows: str = "minute,hour,day"
    # A report run that takes longer than this is cancelled and recorded as failed, seconds.
    report_time_budget_seconds: float = 900.0
    # How long a report run waits for the workers' snapshots of the interval so far, seconds.
    report_snapshot_wait_seconds: float = 5.0
    # Retries of a failed report run (backoff doubles from 30 s).
    report_retries: int = 3
    # Extra Spark settings as a JSON object, e.g. {"spark.hadoop.fs.s3a.endpoint": "..."}.
    spark_conf: str = ""
    # Memory of the Spark driver (in local mode it also runs the tasks).
    spark_driver_memory: str = "2g"
    # Spark SQL shuffle partitions (small data: keep it near the core count).
    spark_shuffle_partitions: int = 8
    # The PostgreSQL JDBC driver Spark writes report tables with (Debian libpostgresql-jdbc-java).
    jdbc_jar: str = "/usr/share/java/postgresql.jar"

    @field_validator("database_url", "redis_url", mode="before")
    @classmethod
    def _strip(cls, value: object) -> object:
        return value.strip() if isinstance(value, str) else value

    # --- derived values -------------------------------------------------------------------
    @property
    def sqlite_path(self) -> Path:
        """The standalone database file."""
        return self.data_dir / "sluice.db"

    @property
    def effective_database_url(self) -> str:
        """The configured database URL, or the standalone SQLite file."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.sqlite_path.resolve()}"

    @property
    def effective_redis_url(self) -> str:
        """The configured Redis URL, or the conventional local default."""
        return self.redis_url or "redis://127.0.0.1:6379/0"

    @property
    def report_window_list(self) -> tuple[str, ...]:
        """The report windows, in order."""
        return tuple(w.strip() for w in self.report_windows.split(",") if w.strip())

    @property
    def effective_lake_path(self) -> str:
        """Where Parquet snapshots land."""
        return self.lake_path or str((self.data_dir / "lake").resolve())
