"""Large external data written past the page cache.

Written through the page cache, every byte of a multi-gigabyte data file is copied into
newly allocated cache pages, which the kernel then writes out and keeps until memory runs
short: on a busy machine that costs several times the copy of a checkpoint (which the
kernel does within itself), and the dirty pages throttle the writer anyway once they pass
the kernel's limit. :func:`unbuffered` gathers the bytes in page-aligned buffers and
writes each whole, block-aligned, with ``O_DIRECT`` (straight to the disk) from a thread
while the next ones fill; the last partial block is written the ordinary way. Where the
system or the file system refuses ``O_DIRECT``, the bytes go through the page cache.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any

#: Data files smaller than this are written through the page cache (a small file is
#: written as fast either way, and stays cached for whoever reads it next).
DIRECT_MIN_BYTES = 64 << 20
#: Each aligned buffer's size: each direct write is this long.
STAGING_BYTES = 8 << 20
#: How many buffers: the disk goes on writing those filled while the caller spends a while
#: on one weight (a large transpose), and the caller goes on filling while the disk stalls.
STAGING_BUFFERS = 4


class DirectWriter:
    """A binary file's ``write`` that sends whole :data:`STAGING_BYTES` buffers with
    ``O_DIRECT``, in order, from a thread: filled buffers are written while the caller
    fills the next (``os.write`` lets go of the GIL), so computing the bytes and writing
    them overlap. The file's descriptor must be at offset 0 with nothing buffered;
    :meth:`finish` writes what is left."""

    def __init__(self, fd: int, flags: int) -> None:
        self.fd, self.flags = fd, flags
        # page-aligned, as O_DIRECT needs
        self._buffers = [mmap.mmap(-1, STAGING_BYTES) for _ in range(STAGING_BUFFERS)]
        self._views = [memoryview(buffer) for buffer in self._buffers]
        self._current = 0
        self._used = 0
        self._direct = True
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="oxport-write")
        #: Each buffer's write in flight, if any: it is refilled once that is done.
        self._pending: list[Future[None] | None] = [None] * len(self._buffers)

    def write(self, data: Any) -> int:
        data = memoryview(data).cast("B")
        done, size = 0, len(data)
        view = self._views[self._current]
        while done < size:
            if not self._used:
                self._wait(self._current)
            take = min(size - done, STAGING_BYTES - self._used)
            view[self._used:self._used + take] = data[done:done + take]
            self._used += take
            done += take
            if self._used == STAGING_BYTES:
                self._pending[self._current] = self._thread.submit(self._send, view)
                self._current = (self._current + 1) % len(self._buffers)
                self._used = 0
                view = self._views[self._current]
        return size

    def finish(self) -> None:
        """Write the bytes still in the buffer (the whole blocks directly, the rest not)."""
        for index in range(len(self._buffers)):
            self._wait(index)
        view = self._views[self._current]
        whole = self._used - self._used % mmap.PAGESIZE
        if whole:
            self._send(view[:whole])
        self._buffered()
        self._write_all(view[whole:self._used])
        self._used = 0

    def close(self) -> None:
        """Wait for the last write, restore the file's flags and release the buffers."""
        self._thread.shutdown(wait=True)
        self._buffered()
        for view, buffer in zip(self._views, self._buffers, strict=True):
            view.release()
            buffer.close()

    def _wait(self, index: int) -> None:
        """Wait until buffer ``index`` is written (raising that write's error)."""
        pending, self._pending[index] = self._pending[index], None
        if pending is not None:
            pending.result()

    def _send(self, data: memoryview) -> None:
        """Write ``data`` (whole blocks) directly, or through the page cache where the file
        system refuses ``O_DIRECT`` writes."""
        try:
            self._write_all(data)
        except OSError as exc:
            if not self._direct or exc.errno != errno.EINVAL:
                raise
            self._buffered()
            self._write_all(data)

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
