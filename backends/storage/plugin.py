"""Built-in storage schemes, contributed through the same hook third-party plugins use.

Cloud SDKs are imported inside each backend only when a store of that scheme is built: importing
these modules costs nothing.
"""

from __future__ import annotations

from foundry.plugins.hookspecs import hookimpl

from .file import FileStore
from .gcs import GCSStore
from .oci import OCIStore
from .s3 import R2Store, S3Store


@hookimpl
def register_storage(register):
    register("file", FileStore)
    register("s3", S3Store)
    register("r2", R2Store)
    register("gs", GCSStore)
    register("oci", OCIStore)
