"""The container of a saved model: its members in a directory or a zip file.

Writing is atomic (the new model is written beside the old one, flushed,
then renamed over it) and never goes through a symbolic link; reading bounds
every member's size before it is read, refuses damaged or suspicious zips and
verifies the members' sha256 against ``checksums.sha256``. The plain values
of ``model.json`` (numbers, flags, labels with their dtype) are converted and
checked here too; what the members mean is :mod:`autoglm_graph.persistence`'s business.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import hmac
import io
import json
import os
import secrets
import shutil
import sys
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np

__all__ = [
    "CHECKSUMS_NAME",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "JSON_NAME",
    "MAX_COMPRESSION_RATIO",
    "MAX_JSON_DEPTH",
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "PREPROCESSOR_NAME",
    "TENSORS_NAME",
    "ModelFileError",
    "check_save_path",
    "checked_infos",
    "parse_json",
    "read_members",
    "write_members",
]

FORMAT_NAME = "autoglm_graph.model"
FORMAT_VERSION = 2
"""Version of the layout written by :func:`autoglm_graph.persistence.save_model`;
:func:`~autoglm_graph.persistence.load_model` reads exactly this version (2 added
``checksums.sha256`` and ``fitted.offset_used_``). The bootstrap members of
``interval_members`` came later, within version 2: a file without them reads
as before; a file with them needs a reader that knows them (an older one
refuses their ``members.<i>.*`` tensors)."""

JSON_NAME = "model.json"
TENSORS_NAME = "tensors.safetensors"
PREPROCESSOR_NAME = "preprocessor.skops"
CHECKSUMS_NAME = "checksums.sha256"
_MEMBERS = (JSON_NAME, TENSORS_NAME, PREPROCESSOR_NAME)
_ALL_MEMBERS = (*_MEMBERS, CHECKSUMS_NAME)
# What a directory that save() may replace can hold (format 1 had no checksums).
_MEMBERS_WRITTEN = frozenset(_ALL_MEMBERS)

#: Largest size in bytes of each member that :func:`load_model` reads; a
#: larger (or larger-claimed) member is refused before it is read. Change the
#: entries to load bigger models.
MAX_MEMBER_BYTES: dict[str, int] = {
    JSON_NAME: 256 * 2**20,  # string row labels of a few million rows
    TENSORS_NAME: 64 * 2**30,
    PREPROCESSOR_NAME: 256 * 2**20,
    CHECKSUMS_NAME: 4096,
}
#: A zip member that inflates more than this many times is refused (a zip
#: bomb); the model's own members compress at most ~10 times.
MAX_COMPRESSION_RATIO = 200
#: Deepest nesting of lists and objects in ``model.json`` (its own is ~5).
MAX_JSON_DEPTH = 32
#: Most bootstrap members (``interval_members_``) a model file may hold.
MAX_MEMBERS = 1000


class ModelFileError(ValueError):
    """A saved model that cannot be loaded: wrong format or version, a
    tampered or truncated member, or a tensor that does not fit the
    configuration."""


def write_members(path: Path, members: dict[str, bytes]) -> None:
    """Write the model's members, with their ``checksums.sha256``, atomically
    to ``path`` (a zip file if it ends in ``.zip``, else a directory)."""
    members = {**members, CHECKSUMS_NAME: _checksums(members).encode("ascii")}
    if path.suffix.lower() == ".zip":
        _replace_zip(path, members)
    else:
        _replace_directory(path, members)


def read_members(path: Path) -> dict[str, bytes]:
    """The members at ``path``, bounded in size and checked against their
    sha256 (a damaged byte anywhere is refused before anything is parsed)."""
    members = _read_members(path)
    _verify_checksums(members)
    return members


def _checksums(members: dict[str, bytes]) -> str:
    """``sha256sum`` lines of the members (``sha256sum -c`` checks a directory)."""
    return "".join(
        f"{hashlib.sha256(members[name]).hexdigest()}  {name}\n" for name in _MEMBERS
    )


# Saving over a model is atomic: the new model is written beside the old one (a
# temporary name in the same directory, so on the same file system), flushed to
# disk, then renamed over it in one step. A kill at any moment leaves the old
# model or the new one, never a mix; at worst a hidden ``.NAME.*.tmp`` is left.
def _refuse_link(path: Path, what: str) -> None:
    if path.is_symlink():
        raise ValueError(
            f"{what} {path} is a symbolic link; save() never writes through a "
            "link (it could overwrite a file outside the model). Remove the "
            "link or save to another path."
        )


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")


def _write_new_file(path: Path, data: bytes) -> None:
    # O_EXCL | O_NOFOLLOW: a fresh file, never an existing one or a link's target.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_BINARY", 0), 0o666)
    with open(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_directory(path: Path) -> None:
    """Make a rename in ``path`` durable (not possible on every platform)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_save_path(path: str | os.PathLike) -> Path:
    """Refuse now a path that :func:`save_model` would refuse after the work.

    Parameters
    ----------
    path : str or path-like
        Where a model is to be saved.

    Returns
    -------
    Path

    Raises
    ------
    ValueError
        When the path (or a member of the directory) is a symbolic link, a
        ``.zip`` path is a directory, or a directory path is a file or a
        directory holding anything but a saved model.
    """
    path = Path(path)
    if path.suffix.lower() == ".zip":
        _refuse_link(path, "The model file")
        if path.is_dir():
            raise ValueError(
                f"{path} is a directory; a .zip model path must be a file."
            )
    else:
        _refuse_link(path, "The model directory")
        if path.exists():
            _check_replaceable(path)
    return path


def _replace_zip(path: Path, members: dict[str, bytes]) -> None:
    check_save_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    tmp = _temp_name(path)
    try:
        _write_new_file(tmp, buffer.getvalue())
        os.replace(tmp, path)  # atomic on POSIX and Windows
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _replace_directory(path: Path, members: dict[str, bytes]) -> None:
    check_save_path(path)
    exists = path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_name(path)
    os.mkdir(tmp, 0o777)  # the umask applies, as it does to a plain mkdir
    try:
        for member, data in members.items():
            _write_new_file(tmp / member, data)
        _fsync_directory(tmp)
        if exists:
            _exchange(tmp, path)  # tmp now holds the old model
            shutil.rmtree(tmp)
        else:
            os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_directory(path.parent)


def _check_replaceable(path: Path) -> None:
    """Saving replaces the directory whole: it may hold a model and nothing else."""
    if not path.is_dir():
        raise ValueError(
            f"{path} exists and is not a directory; a model directory cannot "
            "replace it (a path ending in .zip saves one file)."
        )
    for entry in os.scandir(path):
        if entry.is_symlink():
            raise ValueError(
                f"The model directory member {entry.path} is a symbolic link; "
                "save() never writes through a link. Remove it first."
            )
        if entry.name not in _MEMBERS_WRITTEN or not entry.is_file():
            raise ValueError(
                f"{path} holds {entry.name!r}, which is not part of a saved model; "
                "save() replaces the directory whole and would delete it. Save "
                "to a new or empty directory."
            )


def _exchange(a: Path, b: Path) -> None:
    """Swap two directories in one atomic step (Linux renameat2, macOS
    renamex_np); elsewhere two renames, with a short window without ``b``."""
    swap = _atomic_swap()
    if swap is not None:
        if swap(os.fsencode(a), os.fsencode(b)) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(err, os.strerror(err), str(a), None, str(b))
    # A file system without an atomic swap: the old model is renamed aside
    # first, so a kill in between leaves it whole under that name.
    aside = _temp_name(b)
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)


def _atomic_swap():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    renameat2 = getattr(libc, "renameat2", None)  # glibc >= 2.28
    if renameat2 is not None:
        at_fdcwd, rename_exchange = -100, 2
        return lambda a, b: renameat2(at_fdcwd, a, at_fdcwd, b, rename_exchange)
    renamex_np = getattr(libc, "renamex_np", None)
    if renamex_np is not None:
        rename_swap = 2
        return lambda a, b: renamex_np(a, b, rename_swap)
    return None


def _read_members(path: Path) -> dict[str, bytes]:
    """The members' bytes, each bounded by :data:`MAX_MEMBER_BYTES` before it
    is read."""
    if path.is_dir():
        missing = [m for m in _ALL_MEMBERS if not (path / m).is_file()]
        if missing == [CHECKSUMS_NAME]:
            raise ModelFileError(
                f"{path} lacks {CHECKSUMS_NAME}: it was saved in format version 1 "
                f"(autoglm_graph 0.1 before checksums) or damaged; this version "
                f"reads format version {FORMAT_VERSION}."
            )
        if missing:
            raise ModelFileError(f"{path} lacks {', '.join(missing)}.")
        return {m: _read_file(path / m, m) for m in _ALL_MEMBERS}
    if not path.exists():
        raise FileNotFoundError(f"No saved model at {path}.")
    limit = sum(MAX_MEMBER_BYTES[m] for m in _ALL_MEMBERS)
    if path.stat().st_size > limit:
        raise ModelFileError(f"{path} is larger than a model may be ({limit} bytes).")
    try:
        if not zipfile.is_zipfile(path):
            raise ModelFileError(f"{path} is neither a model directory nor a zip file.")
        with zipfile.ZipFile(path) as zf:
            infos = checked_infos(zf, f"{path}", _ALL_MEMBERS, limit)
            return {m: _read_zip_member(zf, infos[m]) for m in _ALL_MEMBERS}
    except ModelFileError:
        raise
    except (
        zipfile.BadZipFile,
        zlib.error,
        NotImplementedError,  # an unsupported compression method
        RuntimeError,  # an encrypted member
        OSError,
        EOFError,
        ValueError,
        OverflowError,
    ) as exc:
        raise ModelFileError(f"{path} is a damaged zip file: {exc!r}") from exc


def _read_file(path: Path, member: str) -> bytes:
    limit = MAX_MEMBER_BYTES[member]
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise ModelFileError(
                f"{path} has {size} bytes; {member} may have at most {limit} "
                "(autoglm_graph.persistence._container.MAX_MEMBER_BYTES)."
            )
        data = f.read(size + 1)  # +1: notice a file that grew meanwhile
    if len(data) > limit:
        raise ModelFileError(f"{path} is larger than {limit} bytes.")
    return data


def checked_infos(
    zf: zipfile.ZipFile, where: str, expected: tuple[str, ...] | None, total: int
) -> dict[str, zipfile.ZipInfo]:
    """The members of a zip, refused if duplicated, unexpected, encrypted,
    compressed by an unknown method, too large (a model member beyond its
    :data:`MAX_MEMBER_BYTES`, all together beyond ``total``) or inflating too
    much."""
    infos = zf.infolist()
    names = [info.filename for info in infos]
    if len(names) != len(set(names)):
        duplicated = sorted({n for n in names if names.count(n) > 1})
        raise ModelFileError(f"{where} holds duplicate members: {duplicated}.")
    if expected is not None and set(names) != set(expected):
        raise ModelFileError(
            f"{where} must hold exactly {', '.join(expected)}; got "
            f"{', '.join(sorted(names))}."
        )
    inflated = 0
    for info in infos:
        limit = MAX_MEMBER_BYTES.get(info.filename, total) if expected else total
        if info.flag_bits & 0x1:
            raise ModelFileError(f"{where}: {info.filename} is encrypted.")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ModelFileError(
                f"{where}: {info.filename} uses compression method "
                f"{info.compress_type}; only stored and deflated are read."
            )
        if info.file_size > limit:
            raise ModelFileError(
                f"{where}: {info.filename} claims {info.file_size} bytes; at most "
                f"{limit} are read (the format's MAX_MEMBER_BYTES)."
            )
        if info.file_size > 2**20 and (
            info.file_size > MAX_COMPRESSION_RATIO * max(info.compress_size, 1)
        ):
            raise ModelFileError(
                f"{where}: {info.filename} inflates {info.compress_size} bytes to "
                f"{info.file_size} (more than {MAX_COMPRESSION_RATIO} times): a "
                "zip bomb?"
            )
        inflated += info.file_size
        if inflated > total:
            raise ModelFileError(f"{where} inflates to more than {total} bytes.")
    return {info.filename: info for info in infos}


def _read_zip_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    # Read at most the size checked above, whatever the stream holds.
    with zf.open(info) as f:
        data = f.read(info.file_size + 1)
    if len(data) != info.file_size:
        raise ModelFileError(
            f"{info.filename} holds {len(data)} bytes, not the {info.file_size} "
            "its zip header says."
        )
    return data


def _verify_checksums(members: dict[str, bytes]) -> None:
    """Every member's sha256 against ``checksums.sha256``: a damaged byte
    anywhere is refused before anything is parsed."""
    try:
        lines = members[CHECKSUMS_NAME].decode("ascii").splitlines()
    except UnicodeDecodeError as exc:
        raise ModelFileError(f"{CHECKSUMS_NAME} is damaged: {exc}") from exc
    recorded = {}
    for line in lines:
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or name not in _MEMBERS or name in recorded:
            raise ModelFileError(f"{CHECKSUMS_NAME} has a bad line: {line!r}.")
        recorded[name] = digest
    if set(recorded) != set(_MEMBERS):
        raise ModelFileError(
            f"{CHECKSUMS_NAME} must list {', '.join(_MEMBERS)}; got "
            f"{', '.join(sorted(recorded)) or 'nothing'}."
        )
    for name in _MEMBERS:
        actual = hashlib.sha256(members[name]).hexdigest()
        if not hmac.compare_digest(actual, recorded[name]):
            raise ModelFileError(
                f"{name} does not match its sha256 in {CHECKSUMS_NAME}: the model "
                "file is damaged (or was edited)."
            )


def parse_json(data: bytes) -> dict:
    try:
        config = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # ValueError: bad JSON, or an integer of more than 4300 digits.
        raise ModelFileError(f"{JSON_NAME} is not valid JSON: {exc!r}") from exc
    _check_depth(config, MAX_JSON_DEPTH)
    return config


def _check_depth(value, limit: int) -> None:
    """Refuse JSON nested deeper than ``limit`` (iteratively: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                raise ModelFileError(
                    f"{JSON_NAME} is nested more than {limit} levels deep."
                )
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


# ------------------------------------------------------ values of model.json
_SCALARS = (type(None), bool, int, float, str)
# dtype kinds of classes_ and row labels that a file may ask for.
_LABEL_KINDS = set("biufUO")


def _labels_to_json(values, what: str, put=None) -> dict:
    """Class labels or row labels with their dtype (numbers as a tensor when
    ``put`` is given and the labels are many)."""
    values = np.asarray(values)
    kind = values.dtype.kind
    if kind in "biuf":
        if put is not None:
            put(what, values)
            return {"dtype": values.dtype.str, "tensor": what}
        return {"dtype": values.dtype.str, "values": values.tolist()}
    if kind in "mM":  # datetimes as integers of their unit
        if put is not None:
            put(what, values.view(np.int64))
            return {"dtype": values.dtype.str, "tensor": what}
        return {"dtype": values.dtype.str, "values": values.view(np.int64).tolist()}
    items = values.tolist()
    if kind == "U" or all(isinstance(v, (str, int, float, bool)) for v in items):
        dtype = values.dtype.str if kind == "U" else "|O"
        return {"dtype": dtype, "values": [_plain(v) for v in items]}
    warnings.warn(
        f"The {what} labels of type {type(items[0]).__name__} are saved as strings.",
        UserWarning,
        stacklevel=4,
    )
    return {"dtype": "|O", "values": [str(v) for v in items]}


def _plain(value):
    """numpy scalars and containers -> JSON types (inf and NaN stay floats)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    torch = sys.modules.get("torch")  # a tensor exists only once torch is imported
    if torch is not None and isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if isinstance(value, _SCALARS):
        return value
    return str(value)


def _array_copy(values, dtype=None) -> np.ndarray:
    """A numpy copy of a file's tensor (a torch tensor or a numpy array).

    ``np.array(tensor)`` asks torch's ``__array__`` for a ``copy`` keyword
    it does not take, which NumPy 2 deprecates (a warning now, an error
    later); ``np.asarray`` does not ask.
    """
    return np.asarray(values, dtype=dtype).copy()


def _labels_from_json(spec, tensors, what: str) -> np.ndarray:
    if not isinstance(spec, dict) or not isinstance(spec.get("dtype"), str):
        raise ModelFileError(f"{what} must be {{'dtype': ..., 'values': ...}}.")
    try:
        dtype = np.dtype(spec["dtype"])
    except TypeError as exc:
        raise ModelFileError(f"Bad dtype of {what}: {spec['dtype']!r}.") from exc
    if dtype.kind not in _LABEL_KINDS | {"m", "M"}:
        raise ModelFileError(f"{what} may not have dtype {dtype}.")
    if "tensor" in spec:
        values = _array_copy(tensors[what])
    else:
        values = spec.get("values")
        if not isinstance(values, list) or not all(
            isinstance(v, (str, int, float, bool)) for v in values
        ):
            raise ModelFileError(f"{what} values must be a list of scalars.")
    if dtype.kind in "mM":
        return np.asarray(values, dtype=np.int64).view(dtype)
    if dtype.kind == "O":
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out
    return np.asarray(values, dtype=dtype)


def _int(value, what: str, low: int | None = None, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelFileError(f"{what} must be an integer; got {value!r}.")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ModelFileError(
            f"{what} must be in [{low}, {'inf' if high is None else high}]; "
            f"got {value!r}."
        )
    return value


def _bool(value, what: str) -> bool:
    if not isinstance(value, bool):
        raise ModelFileError(f"{what} must be true or false; got {value!r}.")
    return value


def _history(history) -> list[dict]:
    """Per-epoch logs: a list of objects of scalars, as the training loop writes."""
    if not isinstance(history, list) or not all(
        isinstance(entry, dict) and all(isinstance(v, _SCALARS) for v in entry.values())
        for entry in history
    ):
        raise ModelFileError("history_ must be a list of objects of scalars.")
    return history


def _fit_times(value) -> dict[str, float]:
    """Seconds by phase of the fit (``fit_times_``)."""
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ModelFileError(f"fit_times_ must map phases to seconds; got {value!r}.")
    return {key: _number(s, f"fit_times_[{key!r}]") for key, s in value.items()}


def _number(value, what: str):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelFileError(f"{what} must be a number; got {value!r}.")
    return value


def _str_list(values) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ModelFileError("Feature names must be a list of strings.")
    return values
