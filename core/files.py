"""Files that readers never see half-written (a result, a badge, a cache: a run killed mid-write, a page
served while it is rewritten), in folders checked before the work that fills them starts; and files read
within a bound (`read_bounded`), whatever the path turns out to name."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from jaxbench.core.errors import InvalidInput, file_failure, not_utf8

PROJECT_DIR = Path(__file__).resolve().parents[1]
"""The folder holding jaxbench's packages: a checkout, or the image's /opt/jaxbench/src."""


def cache_folder(name: str, environ: Mapping[str, str]) -> Path:
    """jaxbench's cache `name` for this user: $XDG_CACHE_HOME/jaxbench/NAME, else ~/.cache/jaxbench/NAME."""
    root = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME", "~")).expanduser() / ".cache")
    return Path(root) / "jaxbench" / name


READABLE = 0o644
"""mkstemp makes files only their owner may read; results and badges are read by others (web servers,
the nightly's other jobs)."""


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file in the same directory, flushed to disk, then rename over `path`."""
    write_atomic_bytes(path, text.encode("utf-8"))


def write_atomic_bytes(path: Path, data: bytes) -> None:
    """write_atomic for bytes (a compressed file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, READABLE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _not_a_file(path: Path, flag: str) -> None:
    if path.exists() and not path.is_dir():
        raise InvalidInput(f"{flag} {path}: expected a folder for the results, but it is a file")


def folder_to_write(path: Path, flag: str) -> Path:
    """`path` checked as writable_folder checks it, with nothing made (a dry run, or a command that checks
    every output before it starts any work): a folder a file can be written in, or the nearest folder that
    exists, in which it would be made. InvalidInput otherwise."""
    _not_a_file(path, flag)
    existing = path.absolute()
    try:
        while not existing.exists() and existing.parent != existing:
            existing = existing.parent
        if not existing.is_dir():
            raise NotADirectoryError(20, "Not a directory", str(existing))
        # Permission bits alone do not say it (a read-only mount, root, ACLs): a file made and gone at once.
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:  # also a name too long for the system
        raise InvalidInput(
            f"{flag} {path}: expected a folder that can be created and written in ({error.strerror or error})"
        ) from error
    return path


def file_to_write(path: Path, flag: str) -> Path:
    """`path` checked as a file a command will write (replacing it where it exists), with nothing made:
    not a folder, in a folder that exists or could be made and written in. InvalidInput otherwise."""
    if path.is_dir():
        raise InvalidInput(f"{flag} {path}: a folder; expected a file to write")
    folder_to_write(path.parent, flag)
    return path


def writable_folder(path: Path, flag: str) -> Path:
    """`path`, created if missing, once a file could be written in it: a command checks its output folder
    (`flag`, e.g. --out) before it compiles or trains anything, so that an unusable one stops it at once
    instead of losing a finished run. InvalidInput otherwise."""
    _not_a_file(path, flag)
    try:
        path.mkdir(parents=True, exist_ok=True)
        # Permission bits alone do not say it (a read-only mount, root, ACLs): write a file and remove it.
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        raise InvalidInput(
            f"{flag} {path}: expected a folder that can be created and written in ({error.strerror})"
        ) from error
    return path


def file_in(folder: Path, name: str) -> Path:
    """`folder / name`, once `name` is proven to be a single file name: nothing built from a recipe's names
    may be written outside the output folder (a name like '../../x')."""
    if name in ("", ".", "..") or Path(name).name != name or (os.altsep and os.altsep in name):
        raise InvalidInput(f"{name!r}: expected a plain file name to write in {folder}, not a path")
    return folder / name


TEXT_FILE_LIMIT = 64 * 2**20
"""The largest text file a command reads (a recipe, manifest, flag profile, result or CSV): the largest
real one is a result of a few hundred kilobytes; a bound keeps a mistaken path (a dump, a log) from
taking the machine's memory."""


def read_text(path: Path, limit: int = TEXT_FILE_LIMIT) -> str:
    """The text of `path`, read as UTF-8, line endings as they are (csv wants them so): a regular file, or a
    pipe (`<(command)`), at most `limit` bytes (read_bounded). A leading byte-order mark is dropped:
    spreadsheets write one into every CSV they save. InvalidInput names the file when it cannot be read,
    and the first byte that is not UTF-8 with its offset."""
    data = read_bounded(path, limit, pipes=True)
    try:
        # Not "utf-8-sig": after a byte-order mark it counts offsets from the mark's end, not the file's.
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        raise not_utf8(error, str(path)) from error


def _kind_of(mode: int) -> str:
    kinds = {
        stat.S_IFDIR: "a folder",
        stat.S_IFIFO: "a named pipe",
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
        stat.S_IFSOCK: "a socket",
    }
    return kinds.get(stat.S_IFMT(mode), "not a regular file")


def read_bounded(path: Path, limit: int, *, pipes: bool = False) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them; InvalidInput naming the file otherwise.
    Nothing else is read: a folder, a device (/dev/zero never ends) or a file over `limit` is refused before
    its content is, so memory stays within `limit` whatever the path names. With `pipes`, a pipe is read
    too, to `limit`: one a command writes into (`<(command)`) as it writes, a named pipe nothing writes to
    as empty, at once (a blocking open would wait for a writer forever)."""
    try:
        # O_NONBLOCK: opening a named pipe does not wait for a writer; a regular file reads as usual.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise file_failure(error) from error
    try:
        info = os.fstat(fd)
        if pipes and stat.S_ISFIFO(info.st_mode):
            os.set_blocking(fd, True)  # opened without waiting; now reads wait for what a writer sends
        elif not stat.S_ISREG(info.st_mode):  # before fdopen, which refuses a folder with its own error
            raise InvalidInput(f"{path}: {_kind_of(info.st_mode)}; expected a regular file")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:  # closes fd
        size = f"{info.st_size:,} bytes"
        if info.st_size <= limit:
            try:
                # Asking for its size and one byte more: a read allocates what it is asked for, and a file
                # that grew since fstat is read on, to one byte past the limit.
                data = handle.read(info.st_size + 1)
                if len(data) > info.st_size:
                    data += handle.read(limit + 1 - len(data))
            except OSError as error:  # EIO: no file name to name, unlike open's errors
                raise InvalidInput(f"{path}: cannot be read: {error.strerror or error}") from error
            if len(data) <= limit:
                return data
            size = f"over {limit:,} bytes"
    raise InvalidInput(f"{path}: {size}; expected at most {limit:,} bytes")
