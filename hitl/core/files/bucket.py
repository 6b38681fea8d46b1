"""The S3 storage of thread files (HITL_FILES_S3_BUCKET): django-storages' S3Storage, with
three changes.

- A file opened for reading streams the body of one GET. S3Storage's own reader HEADs the
  object twice and downloads all of it to a spooled temporary file before the first byte
  is read: a download cost five requests, and a 64 KB preview the whole object.
- Short timeouts and three attempts: a bucket that does not answer fails a request in
  seconds rather than holding a web thread for minutes (botocore: 60 s per connect, five
  attempts).
- Any failure other than "no such key" is a `BucketUnavailable` (an OSError, as a disk's
  would be) that names the S3 error code and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from django.core.files.base import File
from storages.backends.s3 import S3Storage
from storages.utils import clean_name


class BucketUnavailable(OSError):
    """The bucket refused or did not answer."""


def unavailable(err: ClientError | BotoCoreError) -> BucketUnavailable:
    if isinstance(err, ClientError):
        code = err.response.get("Error", {}).get("Code") or "error"
        return BucketUnavailable(f"The file store refused the request ({code}).")
    return BucketUnavailable(f"The file store did not answer ({type(err).__name__}).")


@contextmanager
def _answered() -> Iterator[None]:
    try:
        yield
    except (ClientError, BotoCoreError) as err:
        raise unavailable(err) from None


class ObjectReader(File):
    """An object's bytes as they arrive (read-only, not seekable)."""

    def __init__(self, body, name: str, size: int):
        super().__init__(body, name)
        self._object_size = size

    @property
    def size(self) -> int:
        return self._object_size

    def seekable(self) -> bool:
        return False

    def read(self, *args):
        with _answered():
            return self.file.read(*args)


class BucketStorage(S3Storage):
    def __init__(self, **settings):
        super().__init__(**settings)
        if "client_config" not in settings:
            self.client_config = Config(
                s3={"addressing_style": self.addressing_style},
                signature_version=self.signature_version,
                proxies=self.proxies,
                connect_timeout=5,
                read_timeout=30,
                retries={"mode": "standard", "max_attempts": 3},
            )

    def _open(self, name, mode="rb"):
        if mode != "rb":
            with _answered():
                return super()._open(name, mode)
        key = self._normalize_name(clean_name(name))
        try:
            got = self.connection.meta.client.get_object(Bucket=self.bucket_name, Key=key)
        except ClientError as err:
            if err.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
                raise FileNotFoundError(f"File does not exist: {name}") from None
            raise unavailable(err) from None
        except BotoCoreError as err:
            raise unavailable(err) from None
        return ObjectReader(got["Body"], name, got["ContentLength"])

    def _save(self, name, content):
        with _answered():
            return super()._save(name, content)

    def delete(self, name):
        with _answered():
            super().delete(name)

    def exists(self, name):
        with _answered():
            return super().exists(name)

    def listdir(self, name):
        with _answered():
            return super().listdir(name)

    def size(self, name):
        with _answered():
            return super().size(name)
