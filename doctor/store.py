"""The payload store: reachable, writable and readable, checked with a probe blob that is
written, read back (its hash checked) and removed."""

from __future__ import annotations

import os

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriver,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from app.settings import environment as app_settings
from app.store import store
from doctor.checks import Check, failed, one_line, passed

NAME = "payload store"


async def store_check() -> Check:
    settings = app_settings.current()
    location = store.location(settings)
    driver = store.driver(location)
    probe = Payload(metadata={"encoding": b"binary/plain"}, data=os.urandom(32))
    try:
        [claim] = await driver.store(StorageDriverStoreContext(), [probe])
        [back] = await driver.retrieve(StorageDriverRetrieveContext(), [claim])
        if back != probe:
            raise store.StoreError(f"payload store {location}: the probe read back differs")
        await _remove(driver, dict(claim.claim_data))
    except Exception as error:  # any driver's or client's: said in one line
        where = "" if str(location) in str(error) else f"{location}: "
        fix = (
            f"check {store.STORE_VARIABLE} and AWS's settings (AWS_ENDPOINT_URL, AWS_REGION, "
            "credentials): the bucket must exist and allow PutObject and GetObject"
            if location.kind == "s3"
            else f"check {store.STORE_VARIABLE}: the directory must be writable by this user"
        )
        return failed(NAME, one_line(f"{where}{error}"), fix)
    return passed(
        NAME,
        f"{location} is reachable, writable and readable (payloads from "
        f"{settings.store_threshold:,} bytes are stored)",
    )


async def _remove(driver: StorageDriver, claim: dict[str, str]) -> None:
    if isinstance(driver, store.LocalStore):
        driver.path(claim["namespace"], claim["sha256"]).unlink(missing_ok=True)
    elif isinstance(driver, store.S3Store):
        s3 = await driver.s3.client()
        await s3.delete_object(Bucket=claim["bucket"], Key=driver.s3.prefix + claim["key"])
