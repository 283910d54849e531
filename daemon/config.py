"""``everlast serve`` configuration: a TOML file, overridden by environment variables
(``EVERLAST_<SECTION>__<KEY>``, e.g. ``EVERLAST_BROKER__BOOTSTRAP_SERVERS``), overridden by flags.
Validated at start (pydantic); every error names the setting and what would work.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

from everlast.daemon.errors import ConfigError

_MODEL_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _not_a_boolean(v: Any) -> Any:
    """pydantic reads ``true`` as 1 for a number; a schedule setting refuses it (engine.fields does too)."""
    if isinstance(v, bool):
        raise ValueError(f"must be a number, not {str(v).lower()}")
    return v


class BrokerConfig(_Strict):
    """Passed through to aiokafka. No ``bootstrap_servers``: start the embedded broker."""

    bootstrap_servers: str | None = None
    embedded_port: int = Field(9092, ge=0, le=65535, description="port of the embedded broker (0: any free port)")
    client_id: str = "everlast"
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"] | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    request_timeout_ms: int = Field(40_000, ge=1000)
    reconnect_backoff_ms: int = Field(200, ge=10)
    max_backoff_s: float = Field(30.0, gt=0)

    @model_validator(mode="after")
    def _sasl_needs_mechanism(self) -> BrokerConfig:
        if self.security_protocol.startswith("SASL") and self.sasl_mechanism is None:
            raise ValueError("security_protocol SASL_* needs broker.sasl_mechanism (e.g. PLAIN or SCRAM-SHA-512)")
        return self

    def aiokafka_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers,
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
            "request_timeout_ms": self.request_timeout_ms,
            "retry_backoff_ms": self.reconnect_backoff_ms,
        }
        if self.security_protocol in ("SSL", "SASL_SSL"):
            from aiokafka.helpers import create_ssl_context

            kw["ssl_context"] = create_ssl_context(
                cafile=str(self.ssl_cafile) if self.ssl_cafile else None,
                certfile=str(self.ssl_certfile) if self.ssl_certfile else None,
                keyfile=str(self.ssl_keyfile) if self.ssl_keyfile else None,
            )
        if self.sasl_mechanism is not None:
            kw["sasl_mechanism"] = self.sasl_mechanism
            kw["sasl_plain_username"] = self.sasl_plain_username
            kw["sasl_plain_password"] = self.sasl_plain_password
        return kw


class TopicsConfig(_Strict):
    queries: str = "everlast.queries"
    labels: str = "everlast.labels"
    dead_letters: str = "everlast.dead-letters"
    checkpoints: str = "everlast.checkpoints"
    partitions: int = Field(4, ge=1, description="used only when the daemon creates missing topics")
    create: bool = Field(True, description="create missing topics at start")


class ConsumerConfig(_Strict):
    group_id: str = "everlast"
    fetch_max_wait_ms: int = Field(20, ge=0, le=60_000)
    session_timeout_ms: int = Field(10_000, ge=500)
    heartbeat_interval_ms: int = Field(1_000, ge=50)
    max_records: int = Field(5_000, ge=1, description="records per fetch (bounds in-flight work)")
    max_record_bytes: int = Field(65_536, ge=64, description="larger query records are invalid")
    client_header: str = Field(
        "everlast-client", min_length=1, max_length=255,
        description="the record header naming a query's client for the per-client quotas; the operator's gateway "
                    "sets it from an authenticated identity (a missing or empty header: the shared anonymous client)",
    )


class CheckpointConfig(_Strict):
    store: Literal["dir", "kafka"] = "dir"
    dir: Path = Path("checkpoints")
    every_queries: int = Field(10_000, ge=1)
    every_seconds: float = Field(5.0, gt=0)
    key_env: str = Field(
        "EVERLAST_CHECKPOINT_KEY", description="env var holding the AES-256 key (hex); unset: no encryption"
    )
    max_chunk_bytes: int = Field(900_000, ge=1024, description="Kafka store: larger blobs are split")
    claim_wait_seconds: float = Field(
        300.0, gt=0, description="how long a replica waits for the state of a model another replica claimed (it "
                                 "never creates it itself), before it stops with an error naming `everlast void-claim`"
    )
    journal: bool = Field(
        True, description="keep the local journal (<dir>/journal.sqlite) of the records processed since the last "
                          "checkpoint, so that a crash recovers exactly without the broker's history"
    )


class MetricsConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(9464, ge=0, le=65535)
    expose_halts_used: bool = Field(
        False, description="export the round's top count: it moves with single queries' outcomes (not query-private)"
    )
    exit_linger_s: float = Field(
        30.0, ge=0, description="after a fatal error, keep /metrics up until one scrape has read it (at most this long)"
    )
    expose_timings: bool = Field(
        True, description="export the timing and CPU series (batch, transition and checkpoint seconds, process_*, "
                          "consumer lag): functions of the data, for operators who own it (docs/OPERATIONS.md, 'Who "
                          "may read /metrics'); false registers none of them (the other series still show when "
                          "rounds change: keep /metrics private to hide that)"
    )


class LogConfig(_Strict):
    format: Literal["text", "json"] = "text"
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class TargetsConfig(_Strict):
    epsilon: float = Field(gt=0)
    delta: float = Field(gt=0, lt=1)
    alpha: float = Field(gt=0, lt=0.5)
    beta: float = Field(0.05, gt=0, lt=1)
    accounting: Literal["tight", "paper"] = "tight"


class QuotasConfig(_Strict):
    """Per-client top quotas (GenericBBL, target-charged; docs/privacy/genericbbl.md 5.5)."""

    share: float = Field(gt=0, le=1, description="a client whose tops in a round pass this share of the round's "
                                                 "halting threshold c0 (noisy test) is refused until the round ends")
    eps: float = Field(gt=0, description="eps_q: the quota test's privacy cost, added to every query's epsilon "
                                         "(Theorem Q+)")

    _numbers = field_validator("share", "eps", mode="before")(_not_a_boolean)

    @model_validator(mode="after")
    def _engine_accepts(self) -> QuotasConfig:
        from everlast.engine.errors import InvalidSchedule
        from everlast.engine.quotas import Quotas

        try:
            Quotas(self.share, self.eps)
        except InvalidSchedule as exc:
            raise ValueError(str(exc)) from None
        return self


class BurnConfig(_Strict):
    """The private burn-rate signal (GenericBBL, target-charged; docs/privacy/genericbbl.md 5.5)."""

    window: int = Field(ge=1, description="queries per window: each completed window releases its noisy top count")
    eps: float = Field(gt=0, description="eps_b: each window's noise is DLap(1/eps_b); added to every query's "
                                         "epsilon (Theorem Q+)")

    _numbers = field_validator("window", "eps", mode="before")(_not_a_boolean)

    @model_validator(mode="after")
    def _engine_accepts(self) -> BurnConfig:
        from everlast.engine.burn import Burn
        from everlast.engine.errors import InvalidSchedule

        try:
            Burn(self.window, self.eps)
        except InvalidSchedule as exc:
            raise ValueError(str(exc)) from None
        return self


BurnSetting = Annotated[
    Annotated[BurnConfig, Tag("burn-table")] | Annotated[Literal[False], Tag("burn-off")],
    Discriminator(lambda v: "burn-off" if v is False else "burn-table"),
]
"""``{ window = .., eps = .. }``, or ``false`` (off)."""


class RangeDomain(_Strict):
    kind: Literal["range"]
    lo: float
    hi: float


class GridDomain(_Strict):
    kind: Literal["grid"]
    points: list[float] = Field(min_length=1, max_length=10_000_000)


class BinsDomain(_Strict):
    kind: Literal["bins"]
    lo: list[float] = Field(min_length=1)
    hi: list[float] = Field(min_length=1)
    bins: int = Field(256, ge=2, le=1 << 20)


class Float64Domain(_Strict):
    kind: Literal["float64"]


DomainConfig = Annotated[Float64Domain | RangeDomain | GridDomain | BinsDomain, Field(discriminator="kind")]


class LearnerConfig(_Strict):
    """The generic private learner's settings (``mechanism = "private-learner"``, docs/privacy/learner.md)."""

    epsilon: float = Field(gt=0, description="the training set is (epsilon, 0)-DP (Theorem L1); queries are 0-DP")
    domain: Literal["float64"] | DomainConfig = Field(
        "float64",
        description=(
            "the finite domain X: all finite doubles (default), a range {kind='range', lo, hi} or a grid "
            "{kind='grid', points=[...]} or public per-feature ranges cut into bins {kind='bins', lo=[...], "
            "hi=[...], bins=256} (the learner's cuts are then bin edges: no probability is spent on cuts "
            "outside the ranges; docs/privacy/learner.md 1). Part of the public configuration: it must be chosen "
            "before, and independently of, the training data (a grid of the training values publishes them)"
        ),
    )
    alpha: float | None = Field(
        None, gt=0, lt=1, description="accuracy target under `guarantee`: refuse to start if n is too small for it"
    )
    beta: float = Field(0.05, gt=0, lt=1, description="failure probability of the accuracy bound")
    holdout: float | None = Field(
        None, ge=0, lt=1,
        description="share of the training set held out (a random subset drawn before the fit) for the validated "
                    "certificate (Theorem V, docs/privacy/learner.md 10); 0: none; default 0.25 under guarantee = "
                    "\"validated\", 0 under the a-priori guarantees (their bounds are about the records fitted on). "
                    "Costs no epsilon (parallel composition under substitution), only fitting data",
    )
    validation_beta: float = Field(
        0.01, ge=1e-12, lt=1,
        description="failure probability of the validated certificate (Theorem V); at least 1e-12 (below, "
                    "the bound's float evaluation is not proven: docs/privacy/learner.md 10)"
    )
    max_error: float | None = Field(
        None, gt=0, lt=1,
        description="guarantee = \"validated\" only: refuse to serve (suspend) a fit whose validated error bound "
                    "exceeds this",
    )
    guarantee: Literal["validated", "agnostic", "realizable"] = Field(
        "validated",
        description=(
            "the accuracy bound `alpha` is checked against (as `everlast plan --guarantee`): validated (the "
            "default: the released model's error measured privately on the held-out share, error <= e w.p. "
            "1 - validation_beta; alpha then caps the certificate's margin e - the measured holdout error, "
            "checked after the fit: a fit over it is suspended, never refitted), agnostic "
            "(error <= the comparator's error + alpha, for every distribution of the labels) or "
            "realizable (error <= alpha, only if the labels are those of a hypothesis of the class -- for trees, "
            "of one stump: real data can contradict it). Both need the training set to be n i.i.d. draws from "
            "the distribution the queries come from; drift or a training set that is not such a sample breaks "
            "them"
        ),
    )

    @field_validator("domain", mode="before")
    @classmethod
    def _domain_kind(cls, v: Any) -> Any:
        if isinstance(v, str) and v != "float64":
            raise ValueError("domain must be \"float64\", { kind = \"range\", lo = .., hi = .. }, "
                             "{ kind = \"grid\", points = [..] } or { kind = \"bins\", lo = [..], hi = [..] }")
        return v

    @field_validator("domain")
    @classmethod
    def _domain(cls, v: Any) -> Any:
        from everlast.engine.errors import InvalidInput
        from everlast.engine.learner.domain import Domain

        try:
            Domain.from_spec(v if isinstance(v, str) else v.model_dump())
        except InvalidInput as exc:
            raise ValueError(str(exc)) from None
        return v

    @property
    def holdout_share(self) -> float:
        """The share held out: ``holdout``, or its default for the guarantee."""
        from everlast.engine.learner.validate import DEFAULT_SHARE

        if self.holdout is not None:
            return self.holdout
        return DEFAULT_SHARE if self.guarantee == "validated" else 0.0

    def domain_spec(self) -> str | dict[str, Any]:
        """The domain as ``engine.learner.Domain.from_spec`` takes it."""
        return self.domain if isinstance(self.domain, str) else self.domain.model_dump()


class ModelConfig(_Strict):
    id: str
    data: Path
    concept: Literal["thresholds", "intervals", "stumps", "trees"] = "thresholds"
    d: int = Field(1, ge=1, description="dimension (stumps, trees)")
    depth: int = Field(3, ge=1, le=8, description="depth of the trees (concept = \"trees\", private learner only)")
    mechanism: Literal["generic-bbl", "private-learner"] = Field(
        "generic-bbl", description="generic-bbl (GenericBBL, the default) or private-learner (docs/privacy/learner.md)"
    )
    schedule: Path | None = Field(None, description="a JSON schedule file; its privacy is certified at start")
    targets: TargetsConfig | None = Field(None, description="privacy targets; the planner makes the schedule")
    learner: LearnerConfig | None = Field(None, description="the private learner's settings (its mechanism only)")
    quotas: QuotasConfig | None = Field(
        None, description="generic-bbl: per-client top quotas, e.g. { share = 0.2, eps = 0.05 } (default: off); the "
                          "client is the record header consumer.client_header"
    )
    burn: BurnSetting | None = Field(
        None, description="generic-bbl: the private burn-rate signal, e.g. { window = 100000, eps = 0.01 }; false: "
                          "off. Default: on for a planned model (window R_1 / 100, eps 0.01, charged in its "
                          "certificate), as the schedule file says for a schedule"
    )
    seed: int | None = Field(
        None, description="generic-bbl: root seed, for tests only (a known seed makes every noise value "
                          "reproducible: warned at start-up); default OS entropy (the checkpoint keeps it either way)"
    )

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _MODEL_ID.match(v):
            raise ValueError("model id must be 1-128 characters of [A-Za-z0-9._-]")
        if v in (".", ".."):  # the directory store's <dir>/<id> would be the store's root or its parent
            raise ValueError(f"model id {v!r} is a directory name of its own; choose another")
        return v

    @field_validator("burn", mode="before")
    @classmethod
    def _burn_on_is_a_table(cls, v: Any) -> Any:
        if v is True:
            raise ValueError("burn = true names no window: give { window = .., eps = .. }, or false to turn it off "
                             "(a planned model has it on by default)")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if self.mechanism == "private-learner":
            if self.learner is None:
                raise ValueError(f"model {self.id}: mechanism = \"private-learner\" needs a [models.learner] table "
                                 "(epsilon, and optionally domain, alpha, beta)")
            if self.schedule is not None or self.targets is not None:
                raise ValueError(f"model {self.id}: 'schedule' and 'targets' are GenericBBL's; the private learner "
                                 "takes its settings from [models.learner]")
            if self.quotas is not None or self.burn is not None:
                raise ValueError(f"model {self.id}: 'quotas' and 'burn' are GenericBBL's (they act on a round's halt "
                                 "budget); the private learner never halts or refuses")
            if self.seed is not None:
                raise ValueError(
                    f"model {self.id}: the private learner takes no seed: its one fit draws 256 bits of OS "
                    "entropy per generator, because its hypothesis can be read back from free queries and a "
                    "guessable seed would let an adversary re-run the fit (docs/privacy/learner.md 2)"
                )
            return self
        if self.learner is not None:
            raise ValueError(f"model {self.id}: [models.learner] needs mechanism = \"private-learner\"")
        if self.concept == "trees":
            raise ValueError(f"model {self.id}: concept = \"trees\" is served by mechanism = \"private-learner\" "
                             "only (GenericBBL has no trees)")
        if (self.schedule is None) == (self.targets is None):
            raise ValueError(f"model {self.id}: give exactly one of 'schedule' (a file) or 'targets'")
        return self


_CLIENT_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


class ApiKeyConfig(_Strict):
    """One API key of the gateway: the client it authenticates and the key's SHA-256 (never the key)."""

    client: str = Field(description="the client id the gateway stamps on every query of this key (1-64 characters "
                                    "of [a-z0-9._-], lower case, starting with a letter or digit); several keys may "
                                    "name one client (rotation): they share its quota")
    sha256: str = Field(description="hex SHA-256 of the key (`everlast gateway-key CLIENT` prints a key and this)")
    revoked: bool = Field(False, description="true: the key is refused (401), as if it were unknown")

    @field_validator("client")
    @classmethod
    def _client(cls, v: str) -> str:
        if not _CLIENT_NAME.match(v):
            raise ValueError("client must be 1-64 characters of [a-z0-9._-] (lower case), starting with a letter or "
                             "digit: it is the normalised client id stamped on each query")
        return v

    @field_validator("sha256")
    @classmethod
    def _hash(cls, v: str) -> str:
        if not _SHA256_HEX.match(v):
            raise ValueError("sha256 must be 64 lower-case hex characters (the SHA-256 of the key, not the key)")
        return v


class GatewayTlsConfig(_Strict):
    """HTTPS for the gateway; with ``client_ca``, client certificates (mTLS) authenticate clients too."""

    certfile: Path
    keyfile: Path
    client_ca: Path | None = Field(None, description="CA bundle that signs client certificates: a client may then "
                                                     "authenticate by a certificate instead of an API key")
    require_client_cert: bool = Field(False, description="refuse TLS connections without a client certificate")


class GatewayConfig(_Strict):
    """``everlast gateway``: the authenticated HTTP API in front of the topics (docs/GATEWAY.md)."""

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535, description="the HTTP API (0: any free port)")
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(9465, ge=0, le=65535, description="/metrics of the gateway (0: any free port)")
    keys: list[ApiKeyConfig] = Field(default_factory=list, description="the API keys, as hashes; also from the "
                                                                       "environment: EVERLAST_GATEWAY__KEYS as JSON")
    tls: GatewayTlsConfig | None = None
    max_body_bytes: int = Field(1_048_576, ge=1024, description="larger request bodies: 413")
    max_queries: int = Field(1_000, ge=1, le=100_000, description="queries in one request; more: 413")
    timeout_s: float = Field(10.0, gt=0, le=600, description="how long a request waits for its labels before 504 "
                                                             "(its queries stay accepted: retry with the same ids)")
    produce_timeout_s: float = Field(5.0, gt=0, description="how long a produce may take before 503")
    client_qps: float = Field(2_000.0, gt=0, description="per client: queries per second (a token bucket)")
    client_burst: int = Field(5_000, ge=1, description="per client: the bucket's size in queries (>= max_queries)")
    client_inflight: int = Field(16, ge=1, description="per client: requests in progress at once; more: 429")
    inflight: int = Field(1_024, ge=1, description="all clients: requests in progress at once; more: 503")
    daemon_readyz: list[str] = Field(default_factory=list, description="the daemons' /readyz URLs: while none answers "
                                                                       "200 the gateway answers 503 (empty: not "
                                                                       "checked)")
    health_interval_s: float = Field(1.0, gt=0, description="how often the broker and the daemons are probed")
    index_max_entries: int = Field(10_000_000, ge=1000, description="labels kept for replayed ids (oldest dropped)")

    @model_validator(mode="after")
    def _burst_fits(self) -> GatewayConfig:
        if self.client_burst < self.max_queries:
            raise ValueError(f"gateway.client_burst ({self.client_burst}) must be at least gateway.max_queries "
                             f"({self.max_queries}), or a full request could never pass")
        hashes = [k.sha256 for k in self.keys]
        if len(hashes) != len(set(hashes)):
            raise ValueError("gateway.keys: the same key hash is listed twice")
        return self


class Config(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="EVERLAST_", env_nested_delimiter="__", extra="forbid", frozen=True)

    broker: BrokerConfig = BrokerConfig()
    topics: TopicsConfig = TopicsConfig()
    consumer: ConsumerConfig = ConsumerConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    metrics: MetricsConfig = MetricsConfig()
    log: LogConfig = LogConfig()
    gateway: GatewayConfig = GatewayConfig()
    models: list[ModelConfig] = Field(default_factory=list)
    shutdown_timeout_s: float = Field(30.0, gt=0)
    drain_timeout_s: float = Field(
        15.0, gt=0, description="on SIGTERM: how long to wait for the broker's acknowledgements of answers "
                                "already sent before the hand-over checkpoint"
    )

    @model_validator(mode="after")
    def _unique_models(self) -> Config:
        ids = [m.id for m in self.models]
        if len(ids) != len(set(ids)):
            raise ValueError("model ids must be unique")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = _TOML_PATH.get("path")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml))
        return tuple(sources)


_TOML_PATH: dict[str, Path | None] = {"path": None}


def load(path: Path | None = None, overrides: dict[str, Any] | None = None) -> Config:
    """File, then environment, then ``overrides`` (flags, nested dicts). Relative paths in the file
    (training data, schedules, checkpoint dir) are resolved against the file's directory."""
    if path is not None and not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    _TOML_PATH["path"] = path
    try:
        cfg = Config(**(overrides or {}))
    except ValidationError as exc:
        raise ConfigError(_explain(exc)) from None
    except (OSError, ValueError) as exc:  # TOML syntax errors arrive as ValueError
        raise ConfigError(f"cannot read config: {exc}") from None
    finally:
        _TOML_PATH["path"] = None
    return _resolve_paths(cfg, path.parent if path is not None else Path.cwd())


def _explain(exc: ValidationError) -> str:
    lines = []
    for e in exc.errors():
        # (a union's branch names and validator wrappers are no settings: left out)
        where = ".".join(str(p) for p in e["loc"] if not any(c in str(p) for c in "[-")) or "config"
        lines.append(f"{where}: {e['msg']}")
    return "invalid configuration:\n  " + "\n  ".join(lines)


def _resolve_paths(cfg: Config, base: Path) -> Config:
    def rel(p: Path | None) -> Path | None:
        return None if p is None or p.is_absolute() else base / p

    models = [
        m.model_copy(update={"data": rel(m.data) or m.data, "schedule": rel(m.schedule) or m.schedule})
        for m in cfg.models
    ]
    ck = cfg.checkpoint.model_copy(update={"dir": rel(cfg.checkpoint.dir) or cfg.checkpoint.dir})
    return cfg.model_copy(update={"models": models, "checkpoint": ck})
