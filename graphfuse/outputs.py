"""Where graphfuse writes its results: checked before any work, written all or nothing.

An output path is refused before compiling when it could never be written (empty, a
folder, in a folder that does not exist) — graphfuse does not create folders, as a C
compiler does not, so a typo in `-o` never leaves a new folder behind. Files are staged
under temporary names in their own folder and renamed only when every one is written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from graphfuse.errors import GraphfuseError


def check_output_file(path: str | Path) -> Path:
    """`path` as a file graphfuse may write (or replace), else a one-line diagnostic."""
    if str(path).strip() == "":
        raise GraphfuseError("output file name is empty")
    target = Path(path)
    if target.is_dir():
        raise GraphfuseError(f"{path}: is a folder; name the output file in it")
    check_parent_folder(target)
    return target


def check_output_folder(path: str | Path) -> Path:
    """`path` as a folder graphfuse may create or fill, else a one-line diagnostic."""
    if str(path).strip() == "":
        raise GraphfuseError("output folder name is empty")
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise GraphfuseError(f"{path}: exists and is not a folder")
    check_parent_folder(target)
    return target


def check_parent_folder(target: Path) -> None:
    parent = target.parent
    if not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist (create it first)"
        raise GraphfuseError(f"{target}: folder {parent} {what}")


def write_all(outputs: Mapping[str | Path, str | Callable[[Path], object]]) -> None:
    """Write every file or none: each goes to a temporary name beside it first (text, or
    a writer called with that name), then all are renamed, in order. A failure leaves the
    files that were there before as they were."""
    for name in outputs:
        check_output_file(name)
    staged: list[tuple[Path, Path]] = []
    target = Path()
    try:
        for name, content in outputs.items():
            target = Path(name)
            temporary = target.with_name(f".{target.name}.graphfuse-tmp")
            staged.append((temporary, target))
            if isinstance(content, str):
                temporary.write_text(content)
            else:
                content(temporary)
        for temporary, target in staged:
            temporary.replace(target)
    except BaseException as error:
        for temporary, _ in staged:
            temporary.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise GraphfuseError(f"{target}: cannot write: {error.strerror}") from None
        raise
