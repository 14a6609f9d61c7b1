"""Payload encryption: an AES-GCM PayloadCodec with its key from the environment.

    COUNCIL_PAYLOAD_KEY       32 random bytes, base64 or hex; setting it turns encryption on
    COUNCIL_PAYLOAD_KEY_ID    the key's name, stored in every payload's metadata
                              (default: a fingerprint of the key)
    COUNCIL_PAYLOAD_OLD_KEYS  earlier keys that still decrypt, for rotation:
                              "ID:KEY,ID:KEY" (a bare KEY is named by its fingerprint)

With a key, every payload (workflow input and result, activity arguments and results,
signals, queries, summaries, failure messages) leaves the process as AES-256-GCM
ciphertext: Temporal's history at rest holds no question, answer or critique. The key
id travels in clear in the payload's metadata (so a rotated key still decrypts old
histories), and it is bound to the ciphertext as associated data.

    python -m app.codec.encryption new-key       print a fresh key
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from app.settings import environment as app_settings
from app.settings.environment import Settings, SettingsError

KEY_VARIABLE = Settings.variables()["payload_key"]
KEY_ID_VARIABLE = Settings.variables()["payload_key_id"]
OLD_KEYS_VARIABLE = Settings.variables()["payload_old_keys"]

ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
KEY_BYTES = 32
NONCE_BYTES = 12
_KEY_ID = re.compile(r"^[A-Za-z0-9._@/+=-]{1,100}$")


class CodecConfigError(ValueError):
    """An encryption setting that cannot be used; the message names the variable and
    never contains a key."""


class CodecError(ValueError):
    """A payload that cannot be decrypted; the message names the key id, never a key."""


def new_key() -> str:
    """A fresh key, base64-encoded, for COUNCIL_PAYLOAD_KEY."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()


def fingerprint(key: bytes) -> str:
    """The default key id: safe to show, since it reveals nothing about the key."""
    return "sha256-" + hashlib.sha256(key).hexdigest()[:16]


def parse_key(text: str, variable: str) -> bytes:
    value = text.strip()
    raw: bytes | None = None
    if len(value) == 2 * KEY_BYTES and re.fullmatch(r"[0-9A-Fa-f]+", value):
        raw = bytes.fromhex(value)
    else:
        standard = value.replace("-", "+").replace("_", "/")  # url-safe base64 too
        try:
            raw = base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None:
        raise CodecConfigError(
            f"{variable} must be {KEY_BYTES} random bytes written as base64 or hex "
            f"(it is neither; make one with: python -m app.codec.encryption new-key)"
        )
    if len(raw) != KEY_BYTES:
        raise CodecConfigError(
            f"{variable} must be {KEY_BYTES} random bytes written as base64 or hex "
            f"(it decodes to {len(raw)} bytes; make one with: "
            "python -m app.codec.encryption new-key)"
        )
    return raw


def _check_key_id(key_id: str, variable: str) -> str:
    if not _KEY_ID.match(key_id):
        raise CodecConfigError(
            f"{variable}: a key id is 1 to 100 characters of letters, digits and ._@/+=- "
            f"(got {key_id[:40]!r})"
        )
    return key_id


@dataclass(frozen=True)
class PayloadKeys:
    """The key that encrypts and every key that still decrypts, by key id."""

    current_id: str
    keys: Mapping[str, bytes] = field(repr=False)

    @property
    def current(self) -> bytes:
        return self.keys[self.current_id]

    @classmethod
    def from_env(cls, env: Settings | Mapping[str, str] | None = None) -> PayloadKeys | None:
        """The keys of the settings (or of the variables given), or None when encryption is
        off."""
        try:
            settings = app_settings.of(env)
        except SettingsError as error:
            raise CodecConfigError(str(error)) from None
        text = settings.payload_key.get_secret_value() if settings.payload_key else ""
        key_id = settings.payload_key_id or ""
        old = settings.payload_old_keys.get_secret_value() if settings.payload_old_keys else ""
        if not text:
            for variable, value in ((KEY_ID_VARIABLE, key_id), (OLD_KEYS_VARIABLE, old)):
                if value:
                    raise CodecConfigError(f"{variable} is set but {KEY_VARIABLE} is not")
            return None
        current = parse_key(text, KEY_VARIABLE)
        current_id = _check_key_id(key_id, KEY_ID_VARIABLE) if key_id else fingerprint(current)
        keys = {current_id: current}
        for position, entry in enumerate((e.strip() for e in old.split(",")), start=1):
            if not entry:
                continue
            name, sep, value = entry.rpartition(":")
            where = f"{OLD_KEYS_VARIABLE} (entry {position})"
            raw = parse_key(value, where)
            name = _check_key_id(name.strip(), where) if sep else fingerprint(raw)
            if keys.get(name, raw) != raw:
                raise CodecConfigError(f"{where}: key id {name!r} names two different keys")
            keys.setdefault(name, raw)
        return cls(current_id, keys)


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM over each whole serialized payload (its metadata included).

    The encrypted payload's data is nonce (12 bytes) + ciphertext + tag; its metadata
    holds only the encoding and the key id.
    """

    def __init__(self, keys: PayloadKeys) -> None:
        self.key_id = keys.current_id
        self._aead = {key_id: AESGCM(key) for key_id, key in keys.keys.items()}

    def __repr__(self) -> str:  # never the keys
        return f"EncryptionCodec(key_id={self.key_id!r}, keys={len(self._aead)})"

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(payload) for payload in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        nonce = os.urandom(NONCE_BYTES)
        key_id = self.key_id.encode()
        sealed = self._aead[self.key_id].encrypt(nonce, payload.SerializeToString(), key_id)
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID_METADATA: key_id},
            data=nonce + sealed,
        )

    def decrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload  # written before encryption was turned on
        key_id = payload.metadata.get(KEY_ID_METADATA, b"").decode(errors="replace")
        aead = self._aead.get(key_id)
        if aead is None:
            raise CodecError(
                f"payload encrypted with key id {key_id!r}, which this process does not have "
                f"(add that key to {OLD_KEYS_VARIABLE})"
            )
        data = payload.data
        try:
            plain = aead.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], key_id.encode())
        except InvalidTag:
            raise CodecError(
                f"payload with key id {key_id!r} failed authentication: wrong key or altered data"
            ) from None
        return Payload.FromString(plain)


def codec_from_env(env: Settings | Mapping[str, str] | None = None) -> EncryptionCodec | None:
    keys = PayloadKeys.from_env(env)
    return EncryptionCodec(keys) if keys else None


def main(argv: list[str]) -> int:
    if argv[:1] == ["new-key"]:
        print(new_key())
        return 0
    if argv[:1] == ["check"]:
        try:
            keys = PayloadKeys.from_env()
        except CodecConfigError as err:
            print(f"codec: {err}", file=sys.stderr)
            return 2
        if keys is None:
            print(f"encryption off ({KEY_VARIABLE} is not set)")
        else:
            print(f"encryption on: key id {keys.current_id}, {len(keys.keys) - 1} older key(s)")
        return 0
    print("usage: python -m app.codec.encryption new-key | check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
