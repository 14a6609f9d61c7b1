"""Payload encryption: key settings, the AES-GCM codec, key rotation, and the codec
server's protocol, CORS and token (in process, over ASGI)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator

import httpx
import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.converter import DefaultFailureConverterWithEncodedAttributes

from app.codec.encryption import (
    ENCODING,
    KEY_ID_METADATA,
    CodecConfigError,
    CodecError,
    EncryptionCodec,
    PayloadKeys,
    fingerprint,
    new_key,
)
from app.codec.server import (
    MAX_BODY_BYTES,
    SHOWN_INLINE_BYTES,
    allowed_hosts,
    app_from_env,
    cors_origins,
    create_app,
)
from app.store import store
from app.temporal import connection
from tests.stored_payloads import converter_of, stored_in

pytestmark = pytest.mark.fast

KEY = new_key()
OTHER_KEY = new_key()


def plain_payload(text: str = "the council's secret answer") -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(text).encode())


def codec(env: dict[str, str]) -> EncryptionCodec:
    keys = PayloadKeys.from_env(env)
    assert keys is not None
    return EncryptionCodec(keys)


# ---- settings ---------------------------------------------------------------------


def test_no_key_means_no_encryption() -> None:
    assert PayloadKeys.from_env({}) is None
    assert connection.data_converter({}).payload_codec is None


@pytest.mark.parametrize(
    "written",
    [
        KEY,
        base64.b64decode(KEY).hex(),
        base64.b64decode(KEY).hex().upper(),
        base64.urlsafe_b64encode(base64.b64decode(KEY)).decode().rstrip("="),
        f"  {KEY}\n",
    ],
    ids=["base64", "hex", "HEX", "urlsafe-unpadded", "whitespace"],
)
def test_key_is_read_as_base64_or_hex(written: str) -> None:
    keys = PayloadKeys.from_env({"COUNCIL_PAYLOAD_KEY": written})
    assert keys is not None and keys.current == base64.b64decode(KEY)
    assert keys.current_id == fingerprint(base64.b64decode(KEY))


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"COUNCIL_PAYLOAD_KEY": "c2hvcnQ="},
            "COUNCIL_PAYLOAD_KEY must be 32 random bytes written as base64 or hex (it decodes to 5 "
            "bytes",
        ),
        (
            {"COUNCIL_PAYLOAD_KEY": "not a key at all!"},
            "COUNCIL_PAYLOAD_KEY must be 32 random bytes written as base64 or hex (it is neither",
        ),
        ({"COUNCIL_PAYLOAD_KEY": "ab" * 31}, "(it decodes to "),
        (
            {"COUNCIL_PAYLOAD_KEY_ID": "k1"},
            "COUNCIL_PAYLOAD_KEY_ID is set but COUNCIL_PAYLOAD_KEY is not",
        ),
        (
            {"COUNCIL_PAYLOAD_OLD_KEYS": f"k0:{KEY}"},
            "COUNCIL_PAYLOAD_OLD_KEYS is set but COUNCIL_PAYLOAD_KEY is not",
        ),
        (
            {"COUNCIL_PAYLOAD_KEY": KEY, "COUNCIL_PAYLOAD_KEY_ID": "has space"},
            "COUNCIL_PAYLOAD_KEY_ID: a key id is 1 to 100 characters",
        ),
        (
            {"COUNCIL_PAYLOAD_KEY": KEY, "COUNCIL_PAYLOAD_OLD_KEYS": "k0:tooshort"},
            "COUNCIL_PAYLOAD_OLD_KEYS (entry 1) must be 32 random bytes",
        ),
        (
            {
                "COUNCIL_PAYLOAD_KEY": KEY,
                "COUNCIL_PAYLOAD_KEY_ID": "k1",
                "COUNCIL_PAYLOAD_OLD_KEYS": f"k1:{OTHER_KEY}",
            },
            "COUNCIL_PAYLOAD_OLD_KEYS (entry 1): key id 'k1' names two different keys",
        ),
    ],
)
def test_bad_settings_get_one_line_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(CodecConfigError) as caught:
        PayloadKeys.from_env(env)
    text = str(caught.value)
    assert message in text and "\n" not in text
    for secret in (KEY, OTHER_KEY, "c2hvcnQ=", "tooshort"):
        assert secret not in text
    # connection.data_converter turns it into the ConfigError the worker and starter print.
    with pytest.raises(connection.ConfigError, match="COUNCIL_PAYLOAD"):
        connection.data_converter(env)


def test_keys_never_show_in_reprs() -> None:
    keys = PayloadKeys.from_env({"COUNCIL_PAYLOAD_KEY": KEY, "COUNCIL_PAYLOAD_OLD_KEYS": OTHER_KEY})
    raw = base64.b64decode(KEY)
    for text in (
        repr(keys),
        repr(EncryptionCodec(keys)),
        repr(connection.data_converter({"COUNCIL_PAYLOAD_KEY": KEY})),
    ):
        assert KEY not in text and raw.hex() not in text and str(raw) not in text


def test_converter_encrypts_failures_too() -> None:
    converter = connection.data_converter(
        {"COUNCIL_PAYLOAD_KEY": KEY, "COUNCIL_PAYLOAD_KEY_ID": "k1"}
    )
    assert isinstance(converter.payload_codec, EncryptionCodec)
    assert converter.failure_converter_class is DefaultFailureConverterWithEncodedAttributes
    assert connection.encryption_note(converter) == "payloads encrypted (key id k1)"
    assert connection.encryption_note(connection.data_converter({})) == "payloads not encrypted"


# ---- the codec ----------------------------------------------------------------------


async def test_round_trip_hides_data_and_metadata() -> None:
    c = codec({"COUNCIL_PAYLOAD_KEY": KEY, "COUNCIL_PAYLOAD_KEY_ID": "2024-q4"})
    original = plain_payload()
    [sealed] = await c.encode([original])
    assert sealed.metadata["encoding"] == ENCODING
    assert sealed.metadata[KEY_ID_METADATA] == b"2024-q4"
    assert set(sealed.metadata) == {"encoding", KEY_ID_METADATA}
    assert b"secret answer" not in sealed.SerializeToString()
    assert b"json/plain" not in sealed.SerializeToString()
    [opened] = await c.decode([sealed])
    assert opened == original
    # A fresh nonce every time: equal payloads do not look equal.
    [again] = await c.encode([original])
    assert again.data != sealed.data


async def test_unencrypted_payloads_pass_through_decode() -> None:
    c = codec({"COUNCIL_PAYLOAD_KEY": KEY})
    original = plain_payload("written before encryption was turned on")
    assert await c.decode([original]) == [original]


async def test_rotation_old_keys_still_decrypt() -> None:
    before = codec({"COUNCIL_PAYLOAD_KEY": OTHER_KEY, "COUNCIL_PAYLOAD_KEY_ID": "2024"})
    [old] = await before.encode([plain_payload("old run")])
    after = codec(
        {
            "COUNCIL_PAYLOAD_KEY": KEY,
            "COUNCIL_PAYLOAD_KEY_ID": "2025",
            "COUNCIL_PAYLOAD_OLD_KEYS": f"2024:{OTHER_KEY}",
        }
    )
    [new] = await after.encode([plain_payload("new run")])
    assert new.metadata[KEY_ID_METADATA] == b"2025"
    assert await after.decode([old, new]) == [plain_payload("old run"), plain_payload("new run")]
    # A bare old key is named by its fingerprint, the default key id.
    unnamed_before = codec({"COUNCIL_PAYLOAD_KEY": OTHER_KEY})
    [fingerprinted] = await unnamed_before.encode([plain_payload("x")])
    unnamed_after = codec({"COUNCIL_PAYLOAD_KEY": KEY, "COUNCIL_PAYLOAD_OLD_KEYS": OTHER_KEY})
    assert await unnamed_after.decode([fingerprinted]) == [plain_payload("x")]


async def test_missing_key_and_tampering_are_named_without_secrets() -> None:
    writer = codec({"COUNCIL_PAYLOAD_KEY": OTHER_KEY, "COUNCIL_PAYLOAD_KEY_ID": "retired"})
    [sealed] = await writer.encode([plain_payload()])
    reader = codec({"COUNCIL_PAYLOAD_KEY": KEY, "COUNCIL_PAYLOAD_KEY_ID": "current"})
    with pytest.raises(
        CodecError,
        match=r"key id 'retired', which this process does not have .*COUNCIL_PAYLOAD_OLD_KEYS",
    ):
        await reader.decode([sealed])

    tampered = Payload()
    tampered.CopyFrom(sealed)
    tampered.data = sealed.data[:-1] + bytes([sealed.data[-1] ^ 1])
    with pytest.raises(CodecError, match="failed authentication") as caught:
        await writer.decode([tampered])
    assert OTHER_KEY not in str(caught.value)

    # The key id is bound to the ciphertext: relabelling a payload does not work either.
    relabelled = Payload()
    relabelled.CopyFrom(sealed)
    relabelled.metadata[KEY_ID_METADATA] = b"other"
    both = codec(
        {
            "COUNCIL_PAYLOAD_KEY": OTHER_KEY,
            "COUNCIL_PAYLOAD_KEY_ID": "other",
            "COUNCIL_PAYLOAD_OLD_KEYS": f"retired:{OTHER_KEY}",
        }
    )
    with pytest.raises(CodecError, match="failed authentication"):
        await both.decode([relabelled])


# ---- the codec server -----------------------------------------------------------------


def as_json(*payloads: Payload) -> str:
    return json_format.MessageToJson(Payloads(payloads=payloads))


def from_json(text: str) -> list[Payload]:
    return list(json_format.Parse(text, Payloads()).payloads)


def http(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


@pytest.fixture
async def server():
    app = create_app(
        codec({"COUNCIL_PAYLOAD_KEY": KEY, "COUNCIL_PAYLOAD_KEY_ID": "k1"}),
        origins=["http://localhost:8233"],
        token="codec-token-123",
    )
    async with http(app) as client:
        yield client


JSON = {"Content-Type": "application/json"}
AUTH = {"Authorization": "Bearer codec-token-123", "X-Namespace": "default", **JSON}


async def test_encode_then_decode_over_http(server: httpx.AsyncClient) -> None:
    encoded = await server.post("/encode", content=as_json(plain_payload()), headers=AUTH)
    assert encoded.status_code == 200
    [sealed] = from_json(encoded.text)
    assert sealed.metadata["encoding"] == ENCODING and b"secret" not in sealed.data
    # The CLI templates the namespace into the path; both forms answer.
    for path in ("/decode", "/default/decode"):
        decoded = await server.post(path, content=encoded.text, headers=AUTH)
        assert decoded.status_code == 200, decoded.text
        assert from_json(decoded.text) == [plain_payload()]
        assert decoded.headers["content-type"] == "application/json"


async def test_token_is_required_and_compared_exactly(server: httpx.AsyncClient) -> None:
    body = as_json(plain_payload())
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "codec-token-123"}):
        response = await server.post("/decode", content=body, headers=headers)
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert (await server.get("/health")).json() == {"status": "ok"}  # no token for the health check


async def test_cors_for_the_ui_origin_only(server: httpx.AsyncClient) -> None:
    preflight = {
        "Origin": "http://localhost:8233",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-namespace,authorization",
    }
    allowed = await server.options("/decode", headers=preflight)  # no token on a preflight
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "http://localhost:8233"
    assert allowed.headers["access-control-allow-credentials"] == "true"
    assert "x-namespace" in allowed.headers["access-control-allow-headers"].lower()

    denied = await server.options("/decode", headers={**preflight, "Origin": "http://evil.example"})
    assert denied.status_code == 400
    assert "access-control-allow-origin" not in denied.headers

    # A real request from the UI origin carries the header, even when refused.
    refused = await server.post(
        "/decode", content="{}", headers={"Origin": "http://localhost:8233", **JSON}
    )
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == "http://localhost:8233"


async def test_bad_bodies_and_unknown_keys_get_400(server: httpx.AsyncClient) -> None:
    assert (await server.post("/decode", content="not json", headers=AUTH)).status_code == 400
    other = codec({"COUNCIL_PAYLOAD_KEY": OTHER_KEY, "COUNCIL_PAYLOAD_KEY_ID": "elsewhere"})
    sealed = other.encrypt(plain_payload())
    response = await server.post("/decode", content=as_json(sealed), headers=AUTH)
    assert response.status_code == 400 and "key id 'elsewhere'" in response.text
    assert OTHER_KEY not in response.text and KEY not in response.text
    assert (await server.get("/decode")).status_code == 405


async def test_server_settings_from_env() -> None:
    assert cors_origins({}) == [
        "http://localhost:8233",
        "http://127.0.0.1:8233",
        "http://localhost:8080",
        "http://127.0.0.1:8080",
    ]
    assert cors_origins(
        {"COUNCIL_CODEC_CORS_ORIGINS": "https://ui.example.com/, http://localhost:8080"}
    ) == [
        "https://ui.example.com",
        "http://localhost:8080",
    ]
    with pytest.raises(
        CodecConfigError,
        match=re.escape("COUNCIL_CODEC_CORS_ORIGINS: 'ui.example.com' is not an origin"),
    ):
        cors_origins({"COUNCIL_CODEC_CORS_ORIGINS": "ui.example.com"})
    # Without a token, no Authorization header is needed.
    async with http(app_from_env({"COUNCIL_PAYLOAD_KEY": KEY})) as open_app:
        encoded = await open_app.post("/encode", content=as_json(plain_payload()), headers=JSON)
    assert encoded.status_code == 200


async def test_the_host_names_it_answers_to() -> None:
    """Loopback, the --host it listens on and COUNCIL_CODEC_ALLOWED_HOSTS, by the web
    page's rule; a bare '*' is refused at start in one line naming the variable."""
    assert allowed_hosts("127.0.0.1", {}) == ["localhost", "127.0.0.1", "[::1]"]
    assert allowed_hosts("0.0.0.0", {"COUNCIL_CODEC_ALLOWED_HOSTS": "codec.example.com"}) == [
        "localhost",
        "127.0.0.1",
        "[::1]",
        "codec.example.com",
    ]
    with pytest.raises(CodecConfigError, match=r"^COUNCIL_CODEC_ALLOWED_HOSTS: '\*' is not"):
        allowed_hosts("127.0.0.1", {"COUNCIL_CODEC_ALLOWED_HOSTS": "*"})
    env = {"COUNCIL_CODEC_ALLOWED_HOSTS": "*.corp.example"}
    async with http(app_from_env(env, bind_host="10.0.0.5")) as client:
        for host, status in (
            ("codec.corp.example:8081", 200),
            ("10.0.0.5:8081", 200),
            ("localhost:8081", 200),
            ("corp.example.evil:8081", 400),
        ):
            response = await client.post(
                "/encode", content=as_json(plain_payload()), headers={**JSON, "Host": host}
            )
            assert (host, response.status_code) == (host, status)


# ---- the codec server and the payload store ---------------------------------------------


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_decode_reads_stored_payloads_as_the_ui_asks(tmp_path, encrypted: bool) -> None:
    """The Web UI posts a page of history payloads to /{namespace}/decode from its origin,
    with the namespace header and the token: references come back as the texts."""
    env = {
        "COUNCIL_STORE": str(tmp_path / "store"),
        "COUNCIL_STORE_THRESHOLD": "1024",
        "COUNCIL_CODEC_TOKEN": "codec-token-123",
        **({"COUNCIL_PAYLOAD_KEY": KEY} if encrypted else {}),
    }
    converter = converter_of("default", env)
    text = "A long answer. " * 400
    stored, small = await converter.encode([text, "short"])
    assert store.reference(stored) is not None and store.reference(small) is None
    ui = {"Origin": "http://localhost:8233", "X-Namespace": "default", **JSON}
    async with http(app_from_env(env)) as ui_client:
        preflight = await ui_client.options(
            "/default/decode",
            headers={
                **ui,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type,x-namespace",
            },
        )
        assert preflight.status_code == 200
        decoded = await ui_client.post(
            "/default/decode",
            content=as_json(stored, small),
            headers={**ui, "Authorization": "Bearer codec-token-123"},
        )
        assert decoded.status_code == 200, decoded.text
        assert decoded.headers["access-control-allow-origin"] == "http://localhost:8233"
        texts = [json.loads(p.data) for p in from_json(decoded.text)]
        assert texts == [text, "short"]
        refused = await ui_client.post("/default/decode", content=as_json(stored), headers=ui)
        assert refused.status_code == 401

        # A blob that is gone: one line naming the store and the hash.
        [blob] = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
        blob.unlink()
        missing = await ui_client.post(
            "/default/decode",
            content=as_json(stored),
            headers={**ui, "Authorization": "Bearer codec-token-123"},
        )
    assert missing.status_code == 400
    assert f"blob sha256:{blob.name} is missing" in missing.text
    assert str(tmp_path / "store") in missing.text and "\n" not in missing.text


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_the_ui_sees_texts_and_downloads_what_stays_a_reference(
    tmp_path, encrypted: bool
) -> None:
    """The Web UI asks /decode with ?preserveStorageRefs=true: a stored text it can show
    comes back in full; one larger than a history could hold inline stays a reference (in
    clear, with its size), which the UI's download button fetches from /download with the
    original payload."""
    env = {
        "COUNCIL_STORE": str(tmp_path / "store"),
        "COUNCIL_STORE_THRESHOLD": "1024",
        **({"COUNCIL_PAYLOAD_KEY": KEY} if encrypted else {}),
    }
    converter = converter_of("default", env)
    shown = "A long answer. " * 400
    huge = "An answer too long to show. " * (SHOWN_INLINE_BYTES // 28 + 1000)
    stored, too_large, small = await converter.encode([shown, huge, "short"])
    assert store.reference(stored) is not None and store.reference(too_large) is not None
    ui = {"Origin": "http://localhost:8233", "X-Namespace": "default", **JSON}
    async with http(app_from_env(env)) as ui_client:
        decoded = await ui_client.post(
            "/decode?preserveStorageRefs=true",
            content=as_json(stored, too_large, small),
            headers=ui,
        )
        assert decoded.status_code == 200, decoded.text
        first, kept, last = from_json(decoded.text)
        assert (json.loads(first.data), json.loads(last.data)) == (shown, "short")
        # As the UI tells a reference: its metadata's message type, and the size it shows.
        assert kept.metadata["messageType"] == b"temporal.api.sdk.v1.ExternalStorageReference"
        assert kept.external_payloads[0].size_bytes > SHOWN_INLINE_BYTES
        assert huge[:100] not in decoded.text

        # The CLI asks without the parameter and gets every text.
        for path in ("/decode", "/default/decode?preserveStorageRefs=false"):
            everything = await ui_client.post(path, content=as_json(too_large), headers=ui)
            assert [json.loads(p.data) for p in from_json(everything.text)] == [huge]

        preflight = await ui_client.options(
            "/default/download?preserveStorageRefs=true",
            headers={
                **ui,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,x-namespace",
            },
        )
        assert preflight.status_code == 200
        # The UI posts {"payloads": [the payload as the history has it]}.
        for path in ("/download", "/default/download"):
            downloaded = await ui_client.post(
                f"{path}?preserveStorageRefs=true", content=as_json(too_large), headers=ui
            )
            assert downloaded.status_code == 200, downloaded.text
            assert downloaded.headers["access-control-allow-origin"] == "http://localhost:8233"
            [payload] = from_json(downloaded.text)
            assert json.loads(payload.data) == huge


# ---- one hostile caller -------------------------------------------------------------------

CLI = {"Content-Type": "application/json", "X-Namespace": "default"}  # what `temporal` sends
UI = {**CLI, "Origin": "http://localhost:8233"}  # what the Web UI's page sends


async def test_an_endless_body_is_refused_at_the_cap_not_buffered() -> None:
    """A body over the cap is refused once the cap is passed (200 MB was read whole before
    its 413); one whose Content-Length says so is refused before any of it is read."""
    app = create_app(None)
    chunk = b" " * 1_000_000
    sent = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(2 * MAX_BODY_BYTES // len(chunk)):
            sent += len(chunk)
            yield chunk

    async with http(app) as client:
        response = await client.post("/default/decode", content=endless(), headers=CLI)
        assert response.status_code == 413
        assert sent <= MAX_BODY_BYTES + len(chunk), f"read {sent:,} bytes before refusing"
        assert response.text == f"the body is over {MAX_BODY_BYTES:,} bytes"

        sent = 0
        declared = await client.post(
            "/default/decode",
            content=endless(),
            headers={**CLI, "Content-Length": str(MAX_BODY_BYTES + 1)},
        )
        assert declared.status_code == 413 and sent <= len(chunk)


async def test_only_json_from_an_allowed_origin_to_this_host_is_decoded(tmp_path) -> None:
    """A page elsewhere may POST text/plain cross-origin with no preflight (a CORS "simple
    request"): that, any body that is not JSON, a foreign Origin and a foreign Host are all
    refused, while the Web UI's requests and the `temporal` CLI's (no Origin) still work."""
    env = {"COUNCIL_STORE": str(tmp_path / "store"), "COUNCIL_STORE_THRESHOLD": "1024"}
    secret = "What the council said in private. " * 100
    body = as_json(await stored_in("default", env, secret))
    async with http(app_from_env(env)) as client:
        for headers in (CLI, UI):
            ok = await client.post("/default/decode", content=body, headers=headers)
            assert ok.status_code == 200, ok.text
            assert [json.loads(p.data) for p in from_json(ok.text)] == [secret]

        simple = {**UI, "Origin": "http://evil.example", "Content-Type": "text/plain"}
        attacks = {
            "cross-origin text/plain": (simple, 403),
            "cross-origin JSON": ({**UI, "Origin": "http://evil.example"}, 403),
            "text/plain from the UI": ({**UI, "Content-Type": "text/plain"}, 415),
            "form from the UI": ({**UI, "Content-Type": "application/x-www-form-urlencoded"}, 415),
            "no content type": ({"X-Namespace": "default"}, 415),
            "foreign Host": ({**CLI, "Host": "evil.example"}, 400),
            "foreign Host and port": ({**CLI, "Host": "evil.example:8081"}, 400),
        }
        for name, (headers, status) in attacks.items():
            refused = await client.post("/default/decode", content=body, headers=headers)
            assert (refused.status_code, name) == (status, name)
            assert "payloads" not in refused.text and "\n" not in refused.text


async def test_a_reference_outside_the_request_namespace_is_refused(tmp_path) -> None:
    """The store names each blob by its namespace and hash: a caller of one namespace who
    names another's blob (a reference copied, or written by hand from a known hash) is
    refused in one line; the namespace's own callers still read it."""
    env = {"COUNCIL_STORE": str(tmp_path / "store"), "COUNCIL_STORE_THRESHOLD": "1024"}
    theirs = "Another team's question, in their namespace. " * 100
    body = as_json(await stored_in("team-b", env, theirs))
    async with http(app_from_env(env)) as client:
        for path, headers, status in (
            ("/default/decode", CLI, 403),
            ("/decode", CLI, 403),
            ("/default/download", UI, 403),
            ("/decode", {"Content-Type": "application/json"}, 400),  # no namespace named
        ):
            refused = await client.post(path, content=body, headers=headers)
            assert (path, refused.status_code) == (path, status), refused.text
            assert refused.text.startswith(("refused: ", "a reference")), refused.text
            assert "\n" not in refused.text
        mixed = await client.post(
            "/team-b/decode", content=body, headers={**CLI, "X-Namespace": "default"}
        )
        assert mixed.status_code == 400 and "payloads" not in mixed.text
        for path, headers in (
            ("/team-b/decode", {**CLI, "X-Namespace": "team-b"}),
            ("/decode", {**CLI, "X-Namespace": "team-b"}),
        ):
            own = await client.post(path, content=body, headers=headers)
            assert own.status_code == 200, own.text
            assert [json.loads(p.data) for p in from_json(own.text)] == [theirs]
