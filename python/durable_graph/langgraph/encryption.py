"""``langgraph.json``'s ``encryption``: the SDK's `Encryption` handlers over what the savers store
(SPEC §25.1, D286).

LangGraph's SDK lets a deployment name an ``Encryption`` object (``{"encryption": {"path":
"./enc.py:encryption"}}``) whose async handlers encrypt and decrypt blobs and JSON objects. The
reference applies the blob handlers to checkpoint blobs and the JSON handlers, key by key, to
metadata. Here the same, inside the savers' serializer (`SealingSerializer`), so every saver
path (``put``, ``put_writes``, ``get_tuple``, ``list``; a run's worker, the service's state and
history reads) stores ciphertext and reads plaintext:

- **Checkpoint values, the checkpoint's own fields and pending writes**: each serialized as
  LangGraph's typed serializer does, then the blob handler's ciphertext, stored as
  ``{"t": "msgpack+sdk", "b": <base64>}`` — LangGraph's own ``EncryptedSerializer`` layout, so
  the store still sees JSON and a graph's msgpack allow-list still applies. Never ``{"j": ...}``
  plain JSON once a blob handler is configured.
- **Checkpoint metadata**: the JSON handler over the metadata object minus `PLAIN_KEYS` (what
  the store itself files a checkpoint by), with the reference's ``__encryption_context__``
  marker; keys must be kept (the reference enforces it too). Metadata without the marker (written
  before encryption was configured, or by the service's own records) reads as it is.

The handlers are coroutines; the serializer is called synchronously by both savers, so each call
runs on one event loop of its own in a daemon thread (`_HandlerLoop`), the caller waiting for it.
An ``@encryption.context`` handler (keys chosen per user) is refused: nothing here carries a
request's user to the worker that writes its checkpoints.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, Final

from langgraph.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from durable_graph.core.errors import ValidationError

CIPHER: Final = "sdk"
"""The cipher name in a stored type (``msgpack+sdk``): the deployment's own blob handlers."""

CONTEXT_KEY: Final = "__encryption_context__"
"""The reference's marker on encrypted JSON: present means the other values are ciphertext."""

PLAIN_KEYS: Final = frozenset(
    {
        "run_id",  # the store files checkpoints by run (delete_for_runs, latest_of_runs)
        "thread_id",
        "checkpoint_id",
        "checkpoint_ns",
        "assistant_id",
        "graph_id",
        "__dg_typed__",  # codec.TYPED_KEY: its values went through the blob handler already
        CONTEXT_KEY,
    }
)
"""Metadata keys never handed to the JSON handler (the reference's never-encrypted system keys)."""

TIMEOUT_S: Final = 60.0
"""How long one handler call may take before the write or read fails."""


class _HandlerLoop:
    """One event loop in a daemon thread: the async handlers run here, called synchronously."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        thread = threading.Thread(target=self._loop.run_forever, name="encryption", daemon=True)
        thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(TIMEOUT_S)


def _plaintext(result: Any) -> Any:
    """A decrypt handler's answer: the value, or a ``DecryptResult``'s plaintext (a replacement
    ciphertext for key rotation is not written back here)."""
    return getattr(result, "plaintext", result)


class _BlobCipher(CipherProtocol):
    """LangGraph's `CipherProtocol` over the blob handlers."""

    def __init__(self, encryption: Any, loop: _HandlerLoop) -> None:
        self._encryption = encryption
        self._loop = loop

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        from langgraph_sdk.encryption.types import EncryptionContext

        ctx = EncryptionContext(model="checkpoint", field="blob")
        out = self._loop.run(self._encryption._blob_encryptor(ctx, plaintext))
        if not isinstance(out, bytes):
            raise ValidationError(f"encryption: the blob encryptor returned {type(out).__name__}")
        return CIPHER, out

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        from langgraph_sdk.encryption.types import EncryptionContext

        if ciphername != CIPHER:
            raise ValidationError(f"stored value: unknown cipher {ciphername!r}")
        if self._encryption._blob_decryptor is None:
            raise ValidationError("stored value is encrypted and no blob decryptor is configured")
        ctx = EncryptionContext(model="checkpoint", field="blob")
        out = _plaintext(self._loop.run(self._encryption._blob_decryptor(ctx, ciphertext)))
        if not isinstance(out, bytes):
            raise ValidationError(f"encryption: the blob decryptor returned {type(out).__name__}")
        return out


class SealingSerializer(EncryptedSerializer):
    """The savers' serializer with a deployment's `Encryption`: blobs through its blob handlers
    (when it has them), metadata through its JSON handlers (when it has them)."""

    def __init__(self, encryption: Any, inner: SerializerProtocol) -> None:
        """``inner``: the savers' own serializer (`codec.safe_serializer`), which the blob
        handlers' plaintext is."""
        self.encryption = encryption
        self._loop = _HandlerLoop()
        super().__init__(_BlobCipher(encryption, self._loop), inner)

    @property
    def seals_blobs(self) -> bool:
        return self.encryption._blob_encryptor is not None

    @property
    def seals_json(self) -> bool:
        return self.encryption._json_encryptor is not None

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if not self.seals_blobs:
            return self.serde.dumps_typed(obj)
        return super().dumps_typed(obj)

    def with_msgpack_allowlist(self, extra: Any) -> SealingSerializer:
        """The same with a graph's allow-list (LangGraph's ``with_allowlist`` asks for it)."""
        inner = self.serde
        if isinstance(inner, JsonPlusSerializer):
            inner = inner.with_msgpack_allowlist(extra)
        clone = SealingSerializer.__new__(SealingSerializer)
        clone.encryption, clone._loop, clone.cipher = self.encryption, self._loop, self.cipher
        clone.serde = inner
        return clone

    def seal_json(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` as stored: its values (but `PLAIN_KEYS`) through the JSON encryptor, marked."""
        from langgraph_sdk.encryption.types import EncryptionContext

        if not self.seals_json:
            return data
        if CONTEXT_KEY in data:
            raise ValidationError(f"metadata: {CONTEXT_KEY!r} is reserved for encryption")
        kept = {k: v for k, v in data.items() if k in PLAIN_KEYS}
        given = {k: v for k, v in data.items() if k not in PLAIN_KEYS}
        ctx = EncryptionContext(model="checkpoint", field="metadata")
        sealed = self._loop.run(self.encryption._json_encryptor(ctx, given))
        if not isinstance(sealed, dict) or set(sealed) != set(given):
            raise ValidationError(
                "encryption: the JSON encryptor must return an object with the keys it was given"
            )
        return {**sealed, **kept, CONTEXT_KEY: {}}

    def open_json(self, stored: dict[str, Any]) -> dict[str, Any]:
        """Stored metadata as it was written: marked values through the JSON decryptor."""
        from langgraph_sdk.encryption.types import EncryptionContext

        if CONTEXT_KEY not in stored:  # written in plaintext (before encryption, or a record)
            return stored
        kept = {k: v for k, v in stored.items() if k in PLAIN_KEYS and k != CONTEXT_KEY}
        given = {k: v for k, v in stored.items() if k not in PLAIN_KEYS}
        if self.encryption._json_decryptor is None:
            raise ValidationError(
                "stored metadata is encrypted and no JSON decryptor is configured"
            )
        ctx = EncryptionContext(model="checkpoint", field="metadata")
        opened = _plaintext(self._loop.run(self.encryption._json_decryptor(ctx, given)))
        if not isinstance(opened, dict):
            raise ValidationError("encryption: the JSON decryptor must return an object")
        return {**opened, **kept}


def check_encryption(found: Any, spec: str) -> Any:
    """``found``, the object ``encryption.path`` (``spec``) names, checked: an SDK
    ``Encryption``, each handler with its pair, at least one pair, no context handler;
    `ValidationError` naming ``encryption`` else."""
    from langgraph_sdk import Encryption

    if not isinstance(found, Encryption):
        raise ValidationError(
            f"config: encryption.path: {spec} is a {type(found).__name__}, not an Encryption"
        )
    blob = (found._blob_encryptor is None, found._blob_decryptor is None)
    json_ = (found._json_encryptor is None, found._json_decryptor is None)
    if blob[0] != blob[1] or json_[0] != json_[1]:
        raise ValidationError(
            "config: encryption: each encrypt handler needs its decrypt handler (blob, json)"
        )
    if blob[0] and json_[0]:
        raise ValidationError("config: encryption: the Encryption has no handlers")
    if found._context_handler is not None:
        raise ValidationError(
            "config: encryption: an @encryption.context handler is not supported (keys per "
            "user are not carried to the workers)"
        )
    return found


__all__ = ["CONTEXT_KEY", "SealingSerializer", "check_encryption"]
