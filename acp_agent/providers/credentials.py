"""Provider keys stored by ``acp-agent login``, so that a user of an editor can sign in
without editing environment variables.

Where: ``$XDG_CONFIG_HOME/acp-agent/credentials/keys.json`` (``~/.config/...``), the
directory 0700 and the file 0600, written whole (a temporary file renamed over it) under a
lock; or the system keyring (service ``acp-agent``, the family as the account) when the
optional ``keyring`` package is installed and works, in which case the file records only
that the family's key is there. Nothing is stored without ``HOME`` or ``XDG_CONFIG_HOME``.

Reading stays cheap enough for the way to ``initialize``: which families have a key is in
the file; the keyring (an import, maybe a desktop prompt) is asked only for the key itself,
when a provider is built, once per process. The registry reads stored keys after the
environment (``providers.registry.endpoint``): a variable that is set always wins.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import msgspec

from .. import log

SERVICE = "acp-agent"
"""The keyring's service name; the account is the provider family (``openai``)."""

Store = Literal["auto", "file", "keyring"]


class CredentialsError(Exception):
    """The store cannot be read or written; the message says which file and why."""


class Entry(msgspec.Struct, omit_defaults=True, frozen=True):
    key: str | None = None
    keyring: bool = False
    """The key is in the system keyring, not here."""


class _File(msgspec.Struct):
    version: int = 1
    providers: dict[str, Entry] = {}


_fetched: dict[str, str] = {}
"""Keys read from the keyring by this process (asked once; scrubbed from children)."""


def directory(env: Mapping[str, str] = os.environ) -> str | None:
    base = env.get("XDG_CONFIG_HOME") or (
        os.path.join(env["HOME"], ".config") if env.get("HOME") else None
    )
    return os.path.join(base, "acp-agent", "credentials") if base else None


def path(env: Mapping[str, str] = os.environ) -> str | None:
    """The file (``None``: no home to keep it in)."""
    d = directory(env)
    return os.path.join(d, "keys.json") if d else None


def _read(file: str | None) -> dict[str, Entry]:
    if file is None:
        return {}
    try:
        with open(file, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CredentialsError(f"{file}: cannot read: {exc.strerror}") from None
    try:
        return msgspec.json.decode(data, type=_File).providers
    except msgspec.DecodeError:  # the message would quote the content: a key, maybe
        raise CredentialsError(
            f"{file}: not a credentials file; delete it and log in again"
        ) from None


def entries(env: Mapping[str, str] = os.environ) -> dict[str, Entry]:
    """The stored entries by family; a store that cannot be read counts as empty (logged,
    never its content)."""
    try:
        return _read(path(env))
    except CredentialsError as exc:
        log.warning("stored credentials ignored", error=str(exc))
        return {}


def key(family: str, env: Mapping[str, str] = os.environ) -> str | None:
    """The stored key of ``family`` (the keyring is asked once per process)."""
    entry = entries(env).get(family)
    if entry is None:
        return None
    if not entry.keyring:
        return entry.key
    if family not in _fetched:
        found = _keyring_get(family)
        if found is None:
            return None
        _fetched[family] = found
    return _fetched[family]


def secrets(env: Mapping[str, str] = os.environ) -> set[str]:
    """The stored key values this process knows: the file's, and those it read from the
    keyring (``childenv`` removes variables holding any of them)."""
    return {e.key for e in entries(env).values() if e.key} | set(_fetched.values())


def save(
    family: str, secret: str, store: Store = "auto", env: Mapping[str, str] = os.environ
) -> str:
    """Store ``secret`` as ``family``'s key; returns where it went, for people."""
    file = path(env)
    if file is None:
        raise CredentialsError("no home directory: set HOME or XDG_CONFIG_HOME")
    place = f"{file} (readable only by you)"
    entry = Entry(key=secret)
    if store != "file":
        try:
            _keyring_call("set_password", family, secret)
            entry = Entry(keyring=True)
            place = f"the system keyring (service {SERVICE!r}, account {family!r})"
        except CredentialsError:
            if store == "keyring":
                raise
    with _locked(file):
        stored = _read(file)
        old = stored.get(family)
        stored[family] = entry
        _write(file, stored)
    if old is not None and old.keyring and not entry.keyring:
        with contextlib.suppress(CredentialsError):
            _keyring_call("delete_password", family)
    _fetched.pop(family, None)
    return place


def remove(family: str | None = None, env: Mapping[str, str] = os.environ) -> list[str]:
    """Forget ``family``'s stored key (every family's with ``None``); returns the families
    whose key was removed."""
    file = path(env)
    if file is None or not os.path.exists(file):
        return []
    with _locked(file):
        stored = _read(file)
        gone = [f for f in stored if family is None or f == family]
        if gone:
            _write(file, {f: e for f, e in stored.items() if f not in gone})
    for f in gone:
        _fetched.pop(f, None)
        if stored[f].keyring:
            try:
                _keyring_call("delete_password", f)
            except CredentialsError as exc:  # gone from the file: the agent no longer uses it
                log.warning("keyring entry not deleted", family=f, error=str(exc))
    return gone


# --------------------------------------------------------------------------- the file


def _private_dir(d: str) -> None:
    os.makedirs(d, mode=0o700, exist_ok=True)
    if os.stat(d).st_mode & 0o077:  # made by someone else, or before us
        os.chmod(d, 0o700)


@contextlib.contextmanager
def _locked(file: str) -> Iterator[None]:
    """Held while the file is read, changed and replaced (two logins at once both count)."""
    d = os.path.dirname(file)
    try:
        _private_dir(d)
        fd = os.open(os.path.join(d, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise CredentialsError(f"{d}: cannot write: {exc.strerror}") from None
    try:
        try:  # POSIX only: Windows has no advisory locks
            import fcntl
        except ImportError:  # Windows: no advisory locks; the rename keeps the file whole
            yield
        else:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
    finally:
        os.close(fd)


def _write(file: str, stored: dict[str, Entry]) -> None:
    import tempfile  # ~7 ms (shutil, bz2...): only when a key is stored or forgotten

    data = msgspec.json.format(msgspec.json.encode(_File(providers=stored))) + b"\n"
    d = os.path.dirname(file)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".keys-", dir=d)  # created 0600
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, file)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise CredentialsError(f"{file}: cannot write: {exc.strerror}") from None


# --------------------------------------------------------------------------- the keyring


def _keyring_call(name: str, *args: str) -> Any:
    try:
        keyring = importlib.import_module("keyring")  # optional: not a dependency
    except ImportError:
        raise CredentialsError(
            "the system keyring needs the `keyring` package (e.g. `uvx --with keyring ...`)"
        ) from None
    try:
        return getattr(keyring, name)(SERVICE, *args)
    except Exception as exc:  # no backend, locked, refused: the keyring says which
        raise CredentialsError(f"system keyring: {type(exc).__name__}: {exc}") from None


def _keyring_get(family: str) -> str | None:
    try:
        found = _keyring_call("get_password", family)
    except CredentialsError as exc:
        log.warning("stored key not read", family=family, error=str(exc))
        return None
    return found if isinstance(found, str) and found else None
