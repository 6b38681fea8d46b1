"""Where per-thread files are kept (a local folder or an S3 bucket), read from the
environment: hitl/settings.py takes the HITL_FILES_S3_* settings and `storage`."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from hitl.env import envstr

# Per-thread files (uploads, workspace, outputs) live in MEDIA_ROOT unless a bucket is
# named: then in that S3 bucket (AWS, MinIO, ...), which every web process and worker
# reaches from any host. Downloads still go through HITL's authorised views, which stream
# the object (docs/operating.md "Files in object storage").
HITL_FILES_S3_BUCKET = envstr("HITL_FILES_S3_BUCKET")
# Empty: AWS. MinIO and other S3 servers: their URL (http://minio:9000).
HITL_FILES_S3_ENDPOINT_URL = envstr("HITL_FILES_S3_ENDPOINT_URL")
HITL_FILES_S3_REGION = envstr("HITL_FILES_S3_REGION")
# Keys are stored under this prefix inside the bucket (empty: at its root).
HITL_FILES_S3_PREFIX = envstr("HITL_FILES_S3_PREFIX").strip("/")
# path: http://host/bucket/key (MinIO, moto); virtual: http://bucket.host/key (AWS).
HITL_FILES_S3_ADDRESSING_STYLE = envstr(
    "HITL_FILES_S3_ADDRESSING_STYLE", "path" if HITL_FILES_S3_ENDPOINT_URL else "virtual"
)
# Both or neither; neither: boto3's own chain (AWS_* variables, an instance or pod role).
# The secret is write-only: it is handed to the storage and shown nowhere.
HITL_FILES_S3_ACCESS_KEY_ID = envstr("HITL_FILES_S3_ACCESS_KEY_ID")
_files_s3_secret = envstr("HITL_FILES_S3_SECRET_ACCESS_KEY")
if HITL_FILES_S3_BUCKET:
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", HITL_FILES_S3_BUCKET):
        raise ImproperlyConfigured(
            f"HITL_FILES_S3_BUCKET must be an S3 bucket name (3-63 lowercase letters, "
            f"digits, '.' or '-'), got {HITL_FILES_S3_BUCKET!r}"
        )
    if HITL_FILES_S3_ENDPOINT_URL and (
        urlsplit(HITL_FILES_S3_ENDPOINT_URL).scheme not in ("http", "https")
        or not urlsplit(HITL_FILES_S3_ENDPOINT_URL).hostname
    ):
        raise ImproperlyConfigured(
            "HITL_FILES_S3_ENDPOINT_URL must be an http(s) URL such as http://minio:9000, "
            f"got {HITL_FILES_S3_ENDPOINT_URL!r}"
        )
    if HITL_FILES_S3_ADDRESSING_STYLE not in ("path", "virtual", "auto"):
        raise ImproperlyConfigured(
            "HITL_FILES_S3_ADDRESSING_STYLE must be path, virtual or auto, "
            f"got {HITL_FILES_S3_ADDRESSING_STYLE!r}"
        )
    if bool(HITL_FILES_S3_ACCESS_KEY_ID) != bool(_files_s3_secret):
        raise ImproperlyConfigured(
            "Set both HITL_FILES_S3_ACCESS_KEY_ID and HITL_FILES_S3_SECRET_ACCESS_KEY, or "
            "neither (boto3 then finds credentials itself)."
        )
    storage = {
        # django-storages' S3Storage, reading an object in one streamed GET.
        "BACKEND": "hitl.core.files.bucket.BucketStorage",
        "OPTIONS": {
            "bucket_name": HITL_FILES_S3_BUCKET,
            "endpoint_url": HITL_FILES_S3_ENDPOINT_URL or None,
            "region_name": HITL_FILES_S3_REGION or None,
            "location": HITL_FILES_S3_PREFIX,
            "addressing_style": HITL_FILES_S3_ADDRESSING_STYLE,
            "access_key": HITL_FILES_S3_ACCESS_KEY_ID or None,
            "secret_key": _files_s3_secret or None,
            # A rewrite replaces the object in one PUT; readers see the old or the new bytes.
            "file_overwrite": True,
            # The bucket's own (private) ACL; nothing hands out object URLs.
            "default_acl": None,
        },
    }
else:
    storage = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
