"""Large external data written past the page cache.

Written through the page cache, every byte of a multi-gigabyte data file is copied into
newly allocated cache pages, which the kernel then writes out and keeps until memory runs
short: on a busy machine that costs several times the copy of a checkpoint (which the
kernel does within itself), and the dirty pages throttle the writer anyway once they pass
the kernel's limit. :func:`unbuffered` gathers the bytes in one page-aligned buffer and
writes it whole, block-aligned, with ``O_DIRECT`` (straight to the disk); the last partial
block is written the ordinary way. Where the system or the file system refuses
``O_DIRECT``, the bytes go through the page cache as before.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from collections.abc import Iterator
from typing import IO, Any

#: Data files smaller than this are written through the page cache (a small file is
#: written as fast either way, and stays cached for whoever reads it next).
DIRECT_MIN_BYTES = 64 << 20
#: The aligned buffer's size: each direct write is this long.
STAGING_BYTES = 8 << 20


class DirectWriter:
    """A binary file's ``write`` that sends whole :data:`STAGING_BYTES` buffers with
    ``O_DIRECT``. The file's descriptor must be at offset 0 with nothing buffered;
    :meth:`finish` writes what is left."""

    def __init__(self, fd: int, flags: int) -> None:
        self.fd, self.flags = fd, flags
        self._staging = mmap.mmap(-1, STAGING_BYTES)  # page-aligned, as O_DIRECT needs
        self._view = memoryview(self._staging)
        self._used = 0
        self._direct = True

    def write(self, data: Any) -> int:
        data = memoryview(data).cast("B")
        done, size = 0, len(data)
        while done < size:
            take = min(size - done, STAGING_BYTES - self._used)
            self._view[self._used:self._used + take] = data[done:done + take]
            self._used += take
            done += take
            if self._used == STAGING_BYTES:
                self._send(STAGING_BYTES)
        return size

    def finish(self) -> None:
        """Write the bytes still in the buffer (the whole blocks directly, the rest not)."""
        whole = self._used - self._used % mmap.PAGESIZE
        if whole:
            self._send(whole)
        self._buffered()
        self._write_all(self._view[:self._used])
        self._used = 0

    def close(self) -> None:
        """Restore the file's flags and release the buffer."""
        self._buffered()
        self._view.release()
        self._staging.close()

    def _send(self, length: int) -> None:
        """Write the buffer's first ``length`` bytes (whole blocks) and keep the rest."""
        try:
            self._write_all(self._view[:length])
        except OSError as exc:
            if not self._direct or exc.errno != errno.EINVAL:
                raise
            self._buffered()  # the file system refuses O_DIRECT writes: the page cache
            self._write_all(self._view[:length])
        rest = self._used - length
        self._view[:rest] = self._view[length:self._used]
        self._used = rest

    def _write_all(self, data: memoryview) -> None:
        while len(data):
            data = data[os.write(self.fd, data):]

    def _buffered(self) -> None:
        if self._direct:
            import fcntl

            fcntl.fcntl(self.fd, fcntl.F_SETFL, self.flags)
            self._direct = False


@contextlib.contextmanager
def unbuffered(handle: IO[bytes], nbytes: int) -> Iterator[Any]:
    """``handle`` (a new, empty file) or, for at least :data:`DIRECT_MIN_BYTES` where
    ``O_DIRECT`` is available, a :class:`DirectWriter` on its descriptor; what was written
    is complete when the block ends without an error."""
    direct = getattr(os, "O_DIRECT", 0)
    if nbytes < DIRECT_MIN_BYTES or not direct:
        yield handle
        return
    import fcntl

    handle.flush()
    fd = handle.fileno()
    if os.lseek(fd, 0, os.SEEK_CUR):
        yield handle
        return
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | direct)
    except OSError:
        yield handle  # not on this file system
        return
    writer = DirectWriter(fd, flags)
    try:
        yield writer
        writer.finish()
    finally:
        writer.close()
