"""Writing a model to a path or a binary file object, crash-safe.

Every file is written under a temporary name beside the target and renamed into place,
the model last: a failed export never leaves a partial file behind, and the next export
to a folder cleans up after a writer that was killed (see :func:`_commit`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

from oxport.errors import InvalidExportArgumentError, OnnxExporterError
from oxport.serialize import direct, weights

if TYPE_CHECKING:
    from oxport.serialize.proto import Serialized

#: ``external_data=PER_TENSOR``: each weight in a file of its own, named after it.
PER_TENSOR = "per_tensor"


def write(serialized: Serialized, f: str | os.PathLike[str] | IO[bytes], *,
          external_data: bool | str | None = None, location: str | None = None,
          progress: weights.Progress | None = None) -> None:
    """Write the model to a path (atomically) or a binary file object.

    ``external_data``: None puts the weights in one file beside the model past 2 GB,
    True always, False never; ``"per_tensor"`` puts each weight in a file of its own.
    ``progress(bytes_written, total_bytes)`` is called after each weight.
    """
    if isinstance(external_data, str) and external_data != PER_TENSOR:
        raise InvalidExportArgumentError(
            f"external_data={external_data!r}: use None (automatic), True, False or "
            f"{PER_TENSOR!r} (one file per weight).")
    use_external = (serialized.weight_bytes > weights.EXTERNAL_DATA_THRESHOLD
                    if external_data is None else external_data)
    if not use_external and \
            serialized.weight_bytes + serialized.model.ByteSize() > weights.PROTOBUF_LIMIT:
        raise InvalidExportArgumentError(
            f"The model holds {serialized.weight_bytes / 2**30:.2f} GiB of weights, more than one "
            "ONNX protobuf can carry (2 GiB): export to a file path with external_data=None "
            "(automatic) or True.")
    if isinstance(f, (str, os.PathLike)):
        _write_path(serialized, os.fspath(f), use_external, location, progress)
        return
    if not hasattr(f, "write"):
        raise InvalidExportArgumentError(
            f"f must be a file path or a binary file object, not {type(f).__name__}.")
    if use_external:
        raise InvalidExportArgumentError(
            "This model needs external data (its weights pass 2 GB): export to a file path, "
            "not a file object.")
    weights.stream(serialized, f, progress)


def check_target(path: str) -> None:
    """Raise a clear error before any work when ``path`` cannot be written."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise InvalidExportArgumentError(
            f"Cannot write {path!r}: the folder {directory!r} does not exist. Create it first.")
    if not os.access(directory, os.W_OK):
        raise InvalidExportArgumentError(
            f"Cannot write {path!r}: the folder {directory!r} is not writable. Choose another "
            "folder or fix its permissions.")
    if os.path.isdir(path):
        raise InvalidExportArgumentError(
            f"Cannot write {path!r}: it is a folder. Give a file name such as "
            f"{os.path.join(path, 'model.onnx')!r}.")


def _write_path(serialized: Serialized, path: str, use_external: bool | str,
                location: str | None, progress: weights.Progress | None = None) -> None:
    """Write to temporary files beside ``path``, then rename them into place, the model last.

    On any failure the temporary files are removed and ``path`` and its weight files are
    left as they were. Temporary files a killed process left behind are removed first.
    """
    directory = os.path.dirname(os.path.abspath(path))
    check_target(path)
    _remove_stale_files(directory)
    temps: list[str] = []
    moves: list[tuple[str, str]] = []  # (temporary, final) paths of the weight files

    def weight_file(name: str) -> IO[bytes]:
        handle = _temp(directory, name, temps)
        moves.append((temps[-1], os.path.join(directory, name)))
        return handle

    try:
        if use_external == PER_TENSOR:
            model = weights.external_files(serialized, os.path.basename(path), weight_file,
                                           progress)
        elif use_external:
            location = location or os.path.basename(path) + ".data"
            with weight_file(location) as data_file, \
                    direct.unbuffered(data_file, serialized.weight_bytes) as sink:
                model = weights.external(serialized, sink, location, progress)
        with _temp(directory, os.path.basename(path), temps) as handle:
            if use_external:
                handle.write(model.SerializeToString())
            else:
                with direct.unbuffered(handle, serialized.weight_bytes) as sink:
                    weights.stream(serialized, sink, progress)
        _commit(temps[-1], path, moves)
        temps.clear()
    except OSError as exc:
        raise OnnxExporterError(
            f"Cannot write {path!r}: {exc.strerror or exc}. Check that the folder exists, is "
            "writable and has free space; nothing was written.") from exc
    finally:
        for temp in temps:
            with contextlib.suppress(OSError):
                os.unlink(temp)


# -- temporary files -------------------------------------------------------------------
#: Every temporary file's name: ``.<final name>.oxport-<host>-<pid>.<start>-<token>.<kind>``
#: (``<start>``: when the writing process started, so a later process that got the same pid,
#: as a restarted container's process does, is told apart; older names lack it).
_TEMP_NAME = re.compile(r"^\.(?P<final>.+)\.oxport-(?P<host>[A-Za-z0-9-]+)-(?P<pid>\d+)"
                        r"(?:\.(?P<start>\d+))?-(?P<token>[a-z0-9_]+)\.(?P<kind>tmp|bak|journal)$")
#: A new file, written only by us, never through a link someone placed there.
_CREATE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_BINARY", 0))
#: How many random names :func:`_create` tries before it gives up.
_TEMP_ATTEMPTS = 100


def _temp(directory: str, name: str, temps: list[str]) -> IO[bytes]:
    """A new empty file beside the target, open for writing, its path appended to ``temps``.

    It is created with mode ``0o666`` and the kernel applies the process's umask (and a
    folder's default ACL), so it gets the permissions a plain ``open`` would give: it is
    renamed into place. It is written through the descriptor that created it: reopening
    it with truncation would make ext4 flush it to disk on close (its
    replace-via-truncate heuristic), which costs as much as the write.
    """
    fd, temp = _create(directory, name)
    temps.append(temp)
    try:
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def _create(directory: str, name: str) -> tuple[int, str]:
    """A new file named for ``name``'s temporary (a random token in it): its descriptor
    and path."""
    attempts = 0
    while True:
        temp = os.path.join(directory, f"{_temp_prefix(name)}{os.urandom(4).hex()}.tmp")
        try:
            return os.open(temp, _CREATE_FLAGS, 0o666), temp
        except FileExistsError:
            attempts += 1
            if attempts == _TEMP_ATTEMPTS:
                raise


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def _start_time(pid: int) -> int | None:
    """When process ``pid`` started (Linux: clock ticks since boot), None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rpartition(b")")[2].split()
        return int(fields[19])  # field 22 of stat; the fields after the name start at 3
    except (OSError, IndexError, ValueError):
        return None


_PROCESS = f"{os.getpid()}.{_start_time(os.getpid()) or 0}"


def _process() -> str:
    """This process as temporary names carry it: ``<pid>.<start time>`` (re-read after a
    fork, which gives the child a pid and start time of its own)."""
    global _PROCESS
    if not _PROCESS.startswith(f"{os.getpid()}."):
        _PROCESS = f"{os.getpid()}.{_start_time(os.getpid()) or 0}"
    return _PROCESS


def _temp_prefix(name: str) -> str:
    return f".{name}.oxport-{_host()}-{_process()}-"


# -- crash-safe renames ----------------------------------------------------------------
# The files of one write are temporary files beside the target until the model file, the
# last, is renamed into place. Replacing weight files an existing model uses is journaled:
# the journal names the model's new inode, each old weight file is kept under a backup
# name until the model is in place, and a failure (or, at the next write to the folder,
# the death of the writing process) puts the old files back.
def _commit(model_temp: str, path: str, moves: Sequence[tuple[str, str]]) -> None:
    """Rename the weight files ``moves`` (temporary, final) into place, then the model.

    Without weight files this is one atomic rename. With them, a journal beside the model
    lists every final name, whether it existed and its backup name; existing files are
    renamed to their backup before the new one takes their name, and on failure
    :func:`_roll_back` restores them.
    """
    if not moves:
        os.replace(model_temp, path)
        return
    directory = os.path.dirname(path)
    token = os.urandom(4).hex()
    entries = [{"final": os.path.basename(final), "existed": os.path.lexists(final),
                "backup": _temp_prefix(os.path.basename(final)) + token + ".bak"}
               for _, final in moves]
    journal = {"model": os.path.basename(path), "inode": os.stat(model_temp).st_ino,
               "files": entries}
    journal_path = os.path.join(directory, _temp_prefix(os.path.basename(path)) + token
                                + ".journal")
    try:
        with open(journal_path, "x", encoding="utf-8") as handle:
            json.dump(journal, handle)
        for (temp, final), entry in zip(moves, entries):
            if entry["existed"]:
                os.replace(final, os.path.join(directory, entry["backup"]))
            os.replace(temp, final)
        os.replace(model_temp, path)
    except BaseException:
        _roll_back(directory, journal)
        with contextlib.suppress(OSError):
            os.unlink(journal_path)
        raise
    for entry in entries:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(directory, entry["backup"]))
    with contextlib.suppress(OSError):
        os.unlink(journal_path)


def _roll_back(directory: str, journal: dict[str, Any]) -> None:
    """Undo an unfinished :func:`_commit`: old weight files back from their backups, new
    ones that replaced nothing removed. Does nothing when the model was renamed into place
    (the write finished; only the backups are left to remove)."""
    model = os.path.join(directory, journal["model"])
    with contextlib.suppress(OSError):
        if os.stat(model).st_ino == journal["inode"]:
            return
    for entry in journal["files"]:
        final = os.path.join(directory, entry["final"])
        backup = os.path.join(directory, entry["backup"])
        with contextlib.suppress(OSError):
            if os.path.lexists(backup):
                os.replace(backup, final)
            elif not entry["existed"]:
                os.unlink(final)


def _remove_stale_files(directory: str) -> None:
    """Finish what writers on this host that were killed mid-write (SIGKILL, SIGTERM) left
    in ``directory``: roll back their journaled renames, remove their temporary files.

    Files of processes still running, or of other hosts sharing the folder, are left alone.
    """
    try:
        names = [n for n in os.listdir(directory) if n.startswith(".") and ".oxport-" in n]
    except OSError:
        return
    stale = [(name, match) for name in names if (match := _TEMP_NAME.match(name))
             and match["host"] == _host() and not _alive(int(match["pid"]), match["start"])]
    stale.sort(key=lambda item: item[1]["kind"] != "journal")  # journals first
    for name, match in stale:
        path = os.path.join(directory, name)
        if match["kind"] == "journal":
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                with open(path, encoding="utf-8") as handle:
                    _roll_back(directory, json.load(handle))
        with contextlib.suppress(OSError):
            os.unlink(path)


def _alive(pid: int, start: str | None = None) -> bool:
    """Whether the process ``pid`` that started at ``start`` (if known) runs; a process
    with that pid that started at another time is a later one (on Windows, where there is
    no cheap safe probe, every process counts as running)."""
    if os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process
        pass
    now = _start_time(pid) if start is not None and start != "0" else None
    return now is None or str(now) == start
