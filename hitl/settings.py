"""One settings module, driven by environment variables.

With no DATABASE_URL / REDIS_URL the app runs embedded: SQLite, a SQLite
checkpointer, the in-memory channel layer and runs executed in-process.
"""

import ipaddress
import json
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from hitl.env import envbool, envfloat, envint, envlist, envstr


def _remote_deployments(raw: str) -> list[dict]:
    """HITL_REMOTE_DEPLOYMENTS read and checked: a JSON list of deployments (see below)."""
    if not raw.strip():
        return []
    try:
        specs = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"HITL_REMOTE_DEPLOYMENTS is not JSON: {exc}") from None
    if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
        raise ImproperlyConfigured("HITL_REMOTE_DEPLOYMENTS must be a JSON list of objects.")
    for spec in specs:
        if not spec.get("name") or not spec.get("url"):
            raise ImproperlyConfigured("Each of HITL_REMOTE_DEPLOYMENTS needs a name and a url.")
        key_env = spec.pop("api_key_env", "")
        if key_env:
            spec["api_key"] = envstr(key_env)
            if not spec["api_key"]:
                raise ImproperlyConfigured(f"{key_env} (the key of {spec['name']}) is not set.")
    return specs


BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(envstr("HITL_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = envbool("DEBUG", False)
SECRET_KEY = envstr("SECRET_KEY")
if not SECRET_KEY:
    # Embedded default: a per-install key kept under var/, never committed.
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        from django.utils.crypto import get_random_string

        key_file.write_text(get_random_string(64))
    SECRET_KEY = key_file.read_text().strip()

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    # Login throttling and lockout; admins unlock under Admin > Axes > Access attempts.
    "axes",
    # One app label, "hitl", owns every model and migration; the other rooms are apps
    # without models, so Django finds their admin, template tags and commands.
    "hitl.core.apps.CoreConfig",
    "hitl.review.apps.ReviewConfig",
    "hitl.ops.apps.OpsConfig",
    # One app per channel (hitl/integrations/): its urls, views, admin, templates.
    "hitl.integrations.slack.apps.SlackConfig",
    "hitl.integrations.email.apps.EmailConfig",
]

MIDDLEWARE = [
    # First, so every later log line of the request carries its ids.
    "hitl.logcontext.request_context_middleware",
    "django.middleware.security.SecurityMiddleware",
    "hitl.security.CSPMiddleware",
    "hitl.security.permissions_policy_middleware",
    # Cross-origin API clients (HITL_API_CORS_ORIGINS); answers preflights early.
    "hitl.api.langgraph.cors.ApiCorsMiddleware",
    # Unrouted /langgraph paths and methods: JSON 404/405, as LangGraph Server answers.
    "hitl.api.langgraph.unrouted.UnroutedJsonMiddleware",
    # A NUL or lone surrogate in a query string or form field: a 400 naming the field.
    "hitl.inputs.bounded_input_middleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # An expired session on a reviewer page: 401 JSON for scripts, login-and-back for
    # forms. Before CSRF, whose view check would answer first.
    "hitl.review.sessions.session_expiry_middleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Answers a locked-out login with the lockout page (429).
    "axes.middleware.AxesMiddleware",
    # Last, so it sees every view's exception: a database/Redis outage is a 503, not a 500.
    "hitl.outage.OutageMiddleware",
]

ROOT_URLCONF = "hitl.urls"
ASGI_APPLICATION = "hitl.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = envstr("DATABASE_URL")
EMBEDDED = not DATABASE_URL
# WAL + a busy timeout so the in-process run executor and requests coexist; every
# transaction takes the write lock at its start, and waits for it in the process.
EMBEDDED_SQLITE_OPTIONS = {
    "timeout": 20,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}
if EMBEDDED:
    DATABASES = {
        "default": {
            # Django's SQLite backend whose writers queue in the process (hitl/sqlite/).
            "ENGINE": "hitl.sqlite",
            "NAME": VAR_DIR / "hitl.sqlite3",
            # Each thread keeps its connection (request threads are reused, run threads
            # pooled): opening one costs five statements and a schema read, and a
            # cycle's three requests and two runs would each open one again.
            "CONN_MAX_AGE": None,
            "OPTIONS": EMBEDDED_SQLITE_OPTIONS,
        }
    }
else:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL)}
    # A bounded psycopg pool per process. Under ASGI each request may run on its own
    # thread, so per-thread persistent connections would pile up past max_connections.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # The pool checks a connection that sat idle before handing it out, so sessions the
    # server dropped (restart, failover, pg_terminate_backend) are replaced, not used;
    # one handed back under a second ago skips the round trip (hitl/postgresql).
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        DATABASES["default"]["ENGINE"] = "hitl.postgresql"
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": envint("DB_POOL_MIN_SIZE", 1),
        "max_size": envint("DB_POOL_MAX_SIZE", 8),
        "timeout": envint("DB_POOL_TIMEOUT", 20),
    }

# A pooler in transaction mode between HITL and Postgres (PgBouncer's pool_mode=transaction):
# HITL_DATABASE_POOLER=pgbouncer. Each transaction may then run on another server session,
# so nothing may live in a session: no prepared statements (HITL_DB_PREPARE: the
# checkpointer's and hitl/core/db/prepared.py's), no server-side cursors (Django's
# .iterator() holds one across transactions). Advisory locks are transaction-scoped always.
HITL_DATABASE_POOLER = envstr("HITL_DATABASE_POOLER", "").strip().lower()
if HITL_DATABASE_POOLER not in ("", "pgbouncer"):
    raise ImproperlyConfigured(
        f"HITL_DATABASE_POOLER must be empty or pgbouncer, got {HITL_DATABASE_POOLER!r}"
    )
HITL_DB_PREPARE = not HITL_DATABASE_POOLER
if HITL_DATABASE_POOLER and not EMBEDDED:
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Login throttling (django-axes): after HITL_LOGIN_FAILURE_LIMIT wrong passwords for one
# username from one address, that pair is locked out for HITL_LOGIN_COOLOFF_MINUTES
# (0: until an admin unlocks it). A success resets the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = envint("HITL_LOGIN_FAILURE_LIMIT", 5)
_cooloff = envint("HITL_LOGIN_COOLOFF_MINUTES", 15)
AXES_COOLOFF_TIME = timedelta(minutes=_cooloff) if _cooloff else None
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
# The client address (REMOTE_ADDR): the TCP peer, or, when the peer is one of
# HITL_TRUSTED_PROXIES (addresses or networks), the right-most X-Forwarded-For entry that is
# not a trusted proxy (hitl.security.ClientAddressMiddleware). Never daphne's
# --proxy-headers, which believes whatever address a client writes into that header.
HITL_TRUSTED_PROXIES = envlist("HITL_TRUSTED_PROXIES")
for _proxy in HITL_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError as _exc:
        raise ImproperlyConfigured(f"HITL_TRUSTED_PROXIES: {_proxy!r} is not an address") from _exc
AXES_CLIENT_IP_CALLABLE = "hitl.security.client_ip"

# Single sign-on through the company's OpenID Connect provider: hitl/settings_sso.py.
from hitl import settings_sso  # noqa: E402
from hitl.settings_sso import *  # noqa: E402, F403
from hitl.settings_sso import HITL_PASSWORD_LOGIN, HITL_SSO  # noqa: E402

if HITL_SSO:
    AUTHENTICATION_BACKENDS.append("hitl.review.sso.SsoBackend")
    if not HITL_PASSWORD_LOGIN:
        AUTHENTICATION_BACKENDS.remove("django.contrib.auth.backends.ModelBackend")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
# A stale or missing CSRF token: a page that says so (JSON for scripts), not Django's.
CSRF_FAILURE_VIEW = "hitl.review.sessions.csrf_failure"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
MEDIA_ROOT = Path(envstr("MEDIA_ROOT", str(VAR_DIR / "media")))
MEDIA_URL = "media/"
# Per-thread files: a local folder or an S3 bucket (hitl/settings_files.py).
from hitl import settings_files  # noqa: E402
from hitl.settings_files import *  # noqa: E402, F403

STORAGES = {
    "default": settings_files.storage,
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# Every body has a cap: JSON API bodies and form posts alike.
DATA_UPLOAD_MAX_MEMORY_SIZE = envint("HITL_MAX_BODY_BYTES", 1_000_000)
FILE_UPLOAD_MAX_MEMORY_SIZE = envint("HITL_MAX_UPLOAD_BYTES", 10_000_000)
# The cap on one requester upload (POST /api/v1/threads/{id}/files).
HITL_MAX_UPLOAD_BYTES = FILE_UPLOAD_MAX_MEMORY_SIZE

SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

# Deployment behind HTTPS (docs/operating.md "Deployment"); compose.yaml turns these on. Off by
# default so `make run` works on plain http://127.0.0.1.
# The header a TLS-terminating proxy sets ("X-Forwarded-Proto"): requests it marks
# "https" count as secure. Set it only behind such a proxy, which must overwrite it.
HITL_PROXY_SSL_HEADER = envstr("HITL_PROXY_SSL_HEADER")
if HITL_PROXY_SSL_HEADER:
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + HITL_PROXY_SSL_HEADER.upper().replace("-", "_"), "https")
SECURE_SSL_REDIRECT = envbool("HITL_SSL_REDIRECT", False)
# The container health check and a Prometheus scraper on the private network speak HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = envbool("HITL_SECURE_COOKIES", False)
SECURE_HSTS_SECONDS = envint("HITL_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("HITL_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = envbool("HITL_HSTS_PRELOAD", False)

# Content-Security-Policy (django-csp): scripts only from our own static files, no
# inline script or handler anywhere. Inline style attributes stay allowed (they cannot
# run code). Responses that set their own policy (file downloads: sandbox) keep it.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
if HITL_SSO and settings_sso.HITL_OIDC_LOGOUT_AT_IDP:
    # The logout form's answer redirects to the provider, and browsers check form-action
    # on a form's redirects too.
    _issuer = urlsplit(settings_sso.HITL_OIDC_ISSUER)
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"].append(
        f"{_issuer.scheme}://{_issuer.netloc}"
    )
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=()"

REDIS_URL = envstr("REDIS_URL")
# "redis" (channels_redis core: per-socket queues) or "redis-pubsub" (one Redis message
# per group and web process, fanned out in-process: much cheaper with hundreds of
# reviewer sockets per process; see bench/README.md, push latency).
HITL_CHANNEL_LAYER = envstr("HITL_CHANNEL_LAYER", "redis")
if HITL_CHANNEL_LAYER not in ("redis", "redis-pubsub"):
    raise ImproperlyConfigured("HITL_CHANNEL_LAYER must be 'redis' or 'redis-pubsub'.")
if REDIS_URL and HITL_CHANNEL_LAYER == "redis-pubsub":
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}]},
        }
    }
elif REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 defaults socket_timeout to 5 s, which aborts the layer's
                # blocking BZPOPMIN (itself 5 s) and tears down every idle socket.
                "hosts": [{"address": REDIS_URL, "socket_timeout": 30}],
                "capacity": 1000,
                "expiry": 30,
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Runs execute on Celery workers when a broker is configured; otherwise in this
# process, on a small thread pool, off the request path.
HITL_EXECUTOR = envstr("HITL_EXECUTOR", "celery" if REDIS_URL else "inprocess")
# Runs one process holds in flight at once: a worker process (its Celery threads pool
# takes this many messages) and the embedded server alike. A run waiting on a model
# costs a thread and its graph's state, not a process (docs/operating.md "Workers and queues").
HITL_RUNS_PER_WORKER = envint("HITL_RUNS_PER_WORKER", 128)
HITL_INPROCESS_WORKERS = envint("HITL_INPROCESS_WORKERS", HITL_RUNS_PER_WORKER)

CELERY_BROKER_URL = envstr("CELERY_BROKER_URL", REDIS_URL or "memory://")
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {"hitl.tasks.run_execute": {"queue": "runs"}}
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # An unacked run whose worker vanished is handed out again after this long.
    "visibility_timeout": envint("HITL_VISIBILITY_TIMEOUT", 3600),
    # Every worker scans for such runs this often (kombu's default scans once per 100 s).
    "unacked_restore_interval": envint("HITL_UNACKED_RESTORE_INTERVAL", 10),
    "unacked_restore_throttle": 1,
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# A worker is one process on Celery's threads pool: each task thread claims a run and
# waits while it streams on the process's run engine, so a worker holds
# HITL_RUNS_PER_WORKER runs in flight. Scale out with more workers (`--scale worker=N`,
# about one per core for CPU-heavy graphs). HITL_WORKER_POOL=prefork with
# HITL_WORKER_CONCURRENCY=N gives the old layout: N processes, one run each.
CELERY_WORKER_POOL = envstr("HITL_WORKER_POOL", "threads")
CELERY_WORKER_CONCURRENCY = envint(
    "HITL_WORKER_CONCURRENCY", HITL_RUNS_PER_WORKER if CELERY_WORKER_POOL == "threads" else 2
)
# Celery's Django fixup closes (and, with a pool under prefork, tears down) every database
# connection around each task unless told to reuse them: 4 new Postgres sessions per
# review cycle. Pooled connections are health-checked before use, so keep them.
CELERY_DB_REUSE_MAX = envint("HITL_DB_REUSE_MAX", 1000)
CELERY_IMPORTS = (
    "hitl.core.worker.tasks",
    "hitl.ops.maintenance",
    "hitl.ops.webhooks",
    "hitl.ops.notifications",
    "hitl.integrations.slack.updates",
    "hitl.core.remote.tasks",
)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Periodic maintenance (celery beat): expire overdue interrupts, requeue runs whose
# lease expired, re-send queued runs whose broker message never arrived.
HITL_EXPIRY_SWEEP_SECONDS = envfloat("HITL_EXPIRY_SWEEP_SECONDS", 15.0)
HITL_REAPER_SECONDS = envfloat("HITL_REAPER_SECONDS", 2.0)
# A queued run whose message was sent this long ago without being picked up is re-sent
# (a broker restart without persistence loses messages); duplicates are harmless.
HITL_REDISPATCH_AFTER = envfloat("HITL_REDISPATCH_AFTER", 20.0)
HITL_MAX_ESCALATIONS = envint("HITL_MAX_ESCALATIONS", 3)
# Seconds a reviewer can undo a decision made in the browser before the agent resumes
# (0: decisions act at once). API clients ask for one per decision.
HITL_UNDO_SECONDS = envfloat("HITL_UNDO_SECONDS", 5.0)
# Milliseconds one decision rule's condition may take on one interrupt; past that the
# rule fails on it and the item goes to people.
HITL_RULE_BUDGET_MS = envint("HITL_RULE_BUDGET_MS", 200)
# How often beat looks for due crons (/langgraph crons): a tick fires this late at most.
HITL_CRON_SWEEP_SECONDS = envfloat("HITL_CRON_SWEEP_SECONDS", 5.0)
CELERY_BEAT_SCHEDULE = {
    "hitl-fire-crons": {
        "task": "hitl.maintenance.fire_crons",
        "schedule": HITL_CRON_SWEEP_SECONDS,
        "options": {"expires": HITL_CRON_SWEEP_SECONDS},
    },
    "hitl-expire-interrupts": {
        "task": "hitl.maintenance.expire_interrupts",
        "schedule": HITL_EXPIRY_SWEEP_SECONDS,
        "options": {"expires": HITL_EXPIRY_SWEEP_SECONDS},
    },
    "hitl-reap-runs": {
        "task": "hitl.maintenance.reap_runs",
        "schedule": HITL_REAPER_SECONDS,
        "options": {"expires": HITL_REAPER_SECONDS},
    },
    "hitl-remote-poll": {
        "task": "hitl.remote.poll",
        "schedule": envfloat("HITL_REMOTE_POLL_SECONDS", 5.0),
        "options": {"expires": envfloat("HITL_REMOTE_POLL_SECONDS", 5.0)},
    },
    "hitl-notify-sweep": {
        "task": "hitl.notify.sweep",
        "schedule": envfloat("HITL_NOTIFY_SWEEP_SECONDS", 30.0),
        "options": {"expires": 30.0},
    },
}
# /metrics needs `Authorization: Bearer <HITL_METRICS_TOKEN>`; without a token it is
# closed (404) unless HITL_METRICS_PUBLIC=1 opens it (a scraper on a private network).
HITL_METRICS_TOKEN = envstr("HITL_METRICS_TOKEN")
HITL_METRICS_PUBLIC = envbool("HITL_METRICS_PUBLIC", False)

# Notifications: e-mail through Django's e-mail framework (any SMTP server)
# and Slack-compatible incoming webhooks (hosts allow-listed like run webhooks).
EMAIL_BACKEND = envstr("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = envstr("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", 25)
EMAIL_HOST_USER = envstr("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = envstr("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = envbool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "hitl@localhost")
# Where links in messages point (the reviewers' address of this app).
# Links in notifications follow the port HITL serves on (HITL_HOST / HITL_PORT, which
# `make run PORT=…` sets) unless the public URL is given.
HITL_PUBLIC_URL = envstr(
    "HITL_PUBLIC_URL",
    f"http://{envstr('HITL_HOST', '127.0.0.1')}:{envint('HITL_PORT', 8000)}",
).rstrip("/")
# New items arriving within this many seconds go out as one message (a fan-out: one digest).
HITL_NOTIFY_BATCH_SECONDS = envfloat("HITL_NOTIFY_BATCH_SECONDS", 5.0)
HITL_NOTIFY_MAX_ATTEMPTS = envint("HITL_NOTIFY_MAX_ATTEMPTS", 5)
HITL_NOTIFY_BACKOFF_SECONDS = envfloat("HITL_NOTIFY_BACKOFF_SECONDS", 30.0)
# Deep links in messages expire after this many seconds (they always need a login too).
HITL_NOTIFY_LINK_MAX_AGE = envint("HITL_NOTIFY_LINK_MAX_AGE", 7 * 24 * 3600)
# A reminder goes to the item's group this many seconds before it expires (0: none).
HITL_NOTIFY_REMIND_BEFORE = envfloat("HITL_NOTIFY_REMIND_BEFORE", 900.0)
# Slack approvals (docs/operating.md "Slack approvals"): the app's signing secret turns on the
# interactivity endpoint /slack/interactivity/ (empty: buttons are not offered).
HITL_SLACK_SIGNING_SECRET = envstr("HITL_SLACK_SIGNING_SECRET")
# A bot token (xoxb-...) lets HITL update a message with chat.update and open the Respond
# modal; without one, messages are updated through a button press's response_url.
HITL_SLACK_BOT_TOKEN = envstr("HITL_SLACK_BOT_TOKEN")
HITL_SLACK_API_URL = envstr("HITL_SLACK_API_URL", "https://slack.com/api/").rstrip("/") + "/"
# Also map a Slack user to the HITL user with the same e-mail when the payload carries one.
HITL_SLACK_MATCH_EMAIL = envbool("HITL_SLACK_MATCH_EMAIL", False)
# E-mail approvals (docs/operating.md "E-mail approvals"): one-click links per allowed decision in
# messages to one user, valid this many seconds, used once, confirmed on a page first.
HITL_EMAIL_ACTIONS = envbool("HITL_EMAIL_ACTIONS", True)
HITL_EMAIL_LINK_MAX_AGE = envint("HITL_EMAIL_LINK_MAX_AGE", 8 * 3600)
# A link also needs the recipient to be logged in (as that user) before it decides.
HITL_EMAIL_LINK_REQUIRE_LOGIN = envbool("HITL_EMAIL_LINK_REQUIRE_LOGIN", False)
# A reviewer's "I'm on it" claim lapses after this many minutes.
HITL_CLAIM_MINUTES = envint("HITL_CLAIM_MINUTES", 30)

# Checkpointer: Postgres when the app uses Postgres, SQLite file otherwise.
HITL_CHECKPOINT_URL = envstr(
    "HITL_CHECKPOINT_URL", DATABASE_URL or f"sqlite:///{VAR_DIR / 'checkpoints.sqlite3'}"
)
HITL_CHECKPOINT_POOL_SIZE = envint("HITL_CHECKPOINT_POOL_SIZE", 4)
# LangGraph's long-term store (graphs' get_store(), /langgraph/store); empty: the
# checkpointer's database (PostgresStore on its pool, or its SQLite file).
HITL_STORE_URL = envstr("HITL_STORE_URL", "")
# A request whose work is safe to repeat (reads, and state changes made in one
# transaction that re-checks its preconditions) is repeated in the server for this
# long while the database drops sessions; a longer outage is a 503 + Retry-After.
HITL_DB_RETRY_SECONDS = envfloat("HITL_DB_RETRY_SECONDS", 2.0)

# Graph registry, like langgraph.json: name -> "module:attr".
HITL_GRAPHS = {
    # The ReAct demo agent: clarification, files, approval, final result.
    "demo": "agents.graphs.demo:demo_graph",
    # The same demo as LangChain v1 builds it: create_agent + HumanInTheLoopMiddleware,
    # pausing in the middleware's format (action_requests / decisions).
    "demo_v1": "agents.graphs.agent_v1:agent_v1_graph",
    "approval": "agents.graphs.examples:approval_graph",
    "parallel_approval": "agents.graphs.examples:parallel_approval_graph",
    "middleware_review": "agents.graphs.examples:middleware_graph",
    "raw_question": "agents.graphs.examples:raw_graph",
    # A typed input (strings, numbers, enum, list): "New thread" shows it as a form.
    "ticket_triage": "agents.graphs.triage:triage_graph",
    # Calls tools an AG-UI client defines; their results resume it.
    "client_tools": "agents.graphs.client_tools:client_tools_graph",
}
for entry in envlist("HITL_EXTRA_GRAPHS"):
    name, _, target = entry.partition("=")
    HITL_GRAPHS[name.strip()] = target.strip()
HITL_DEFAULT_GRAPH = envstr("HITL_DEFAULT_GRAPH", "demo")

# Webhooks: a run's webhook must be on an allow-listed host ("*.example.com"
# allows subdomains); bodies are signed per Standard Webhooks (SECRET_KEY when unset).
# Entries name host and port: "hooks.example.com" (default port), "host:8443", "host:*".
HITL_WEBHOOK_HOSTS = envlist("HITL_WEBHOOK_HOSTS")
# Deliver to loopback, private and link-local addresses too (a receiver on this machine
# or network). Off by default: a webhook must not reach the app's own neighbours.
HITL_WEBHOOK_ALLOW_PRIVATE = envbool("HITL_WEBHOOK_ALLOW_PRIVATE", False)
HITL_WEBHOOK_SECRET = envstr("HITL_WEBHOOK_SECRET")
HITL_WEBHOOK_MAX_ATTEMPTS = envint("HITL_WEBHOOK_MAX_ATTEMPTS", 6)
HITL_WEBHOOK_BACKOFF_SECONDS = envfloat("HITL_WEBHOOK_BACKOFF_SECONDS", 10.0)
HITL_WEBHOOK_TIMEOUT = envfloat("HITL_WEBHOOK_TIMEOUT", 10.0)
# Remote deployments (LangGraph Platform, a self-hosted LangGraph Server, Aegra) whose
# interrupts HITL reviews, besides those registered in admin. A JSON list of
# {"name", "url", "api_key_env" (the variable holding its key), "graphs": [assistant or
# graph ids; empty: all], "reviewer_group"}; settings win over admin edits of the same name.
HITL_REMOTE_DEPLOYMENTS = _remote_deployments(envstr("HITL_REMOTE_DEPLOYMENTS"))
# Which deployment URLs HITL may fetch, by the webhook rules (see HITL_WEBHOOK_HOSTS):
# hosts and ports on an allow-list, and no loopback, private or link-local address unless
# HITL_REMOTE_ALLOW_PRIVATE is set (a deployment on this machine or network).
HITL_REMOTE_HOSTS = envlist("HITL_REMOTE_HOSTS")
HITL_REMOTE_ALLOW_PRIVATE = envbool("HITL_REMOTE_ALLOW_PRIVATE", False)
HITL_REMOTE_POLL_SECONDS = envfloat("HITL_REMOTE_POLL_SECONDS", 5.0)
HITL_REMOTE_TIMEOUT = envfloat("HITL_REMOTE_TIMEOUT", 10.0)
# A resume the deployment could not take (unreachable, key refused) is retried this often.
HITL_REMOTE_RETRY_SECONDS = envfloat("HITL_REMOTE_RETRY_SECONDS", 5.0)
# Resume runs HITL starts on a deployment carry a webhook to HITL_PUBLIC_URL, so the
# thread is followed as soon as the run ends (the poll stays the safety net).
HITL_REMOTE_WEBHOOKS = envbool("HITL_REMOTE_WEBHOOKS", True)
# LangGraph-compatible API and AG-UI endpoint: the longest a request waits for a run.
HITL_API_WAIT_SECONDS = envfloat("HITL_API_WAIT_SECONDS", 300.0)
# Browser origins allowed to call /langgraph/ and /agui/ (e.g. a hosted Agent Inbox).
HITL_API_CORS_ORIGINS = envlist("HITL_API_CORS_ORIGINS")

HITL_DEFAULT_REVIEWER_GROUP = envstr("HITL_DEFAULT_REVIEWER_GROUP", "reviewers")
# A run's lease: a worker heartbeats it; an expired lease lets another worker take over.
HITL_RUN_LEASE_SECONDS = envfloat("HITL_RUN_LEASE_SECONDS", 6.0)
# A run whose worker dies this many times (OOM, hard time limit) fails instead of looping.
HITL_RUN_MAX_ATTEMPTS = envint("HITL_RUN_MAX_ATTEMPTS", 5)
HITL_RUN_TIME_LIMIT = envint("HITL_RUN_TIME_LIMIT", 600)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "hitl.logcontext.ContextFilter"},
        "secrets": {"()": "hitl.logcontext.SecretFilter"},
    },
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s%(context)s"},
        "json": {"()": "hitl.logcontext.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            # LOG_FORMAT=json: one JSON object per line with request/thread/run ids.
            "formatter": envstr("LOG_FORMAT", "plain"),
            "filters": ["context", "secrets"],
        }
    },
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.channels.server": {"level": "WARNING"},
        # On the loggers too, so every handler (not only ours) gets the masked line.
        "django.request": {"filters": ["secrets"]},
        "django.server": {"filters": ["secrets"]},
    },
}

HITL_HOST = envstr("HITL_HOST", "127.0.0.1")
HITL_PORT = envint("HITL_PORT", 8000)
