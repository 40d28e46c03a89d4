"""Renaming a library's exported prefix in place (graphfuse/runtime/c_api/rename.py), on
libraries built here from a few lines of C: the loader finds the new names through the
rebuilt hash table, the old ones are gone, and what cannot be renamed in place is refused."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from graphfuse.runtime.c_api.describe import CLibrary
from graphfuse.runtime.c_api.link import read_interface
from graphfuse.runtime.c_api.naming import DESCRIPTION_SECTION
from graphfuse.runtime.c_api.rename import SYSV_HASH_STYLE, RenameError, elf_hash, rename_library
from graphfuse.runtime.cpu_tools import run_tool


def _library(
    folder: Path, prefix: str, hash_style: str = SYSV_HASH_STYLE, described: bool = True
) -> tuple[Path, CLibrary]:
    """A library exporting `prefix`'s two library functions, with its description."""
    interface = CLibrary(prefix, "lib.so", 1, ())
    text = interface.to_json().replace("\\", "\\\\").replace('"', '\\"')
    source = folder / "lib.c"
    section = (
        f'__attribute__((used, section("{DESCRIPTION_SECTION}"))) '
        f'static const char description[] = "{text}";\n'
        if described
        else ""
    )
    source.write_text(
        f"int {prefix}_abi_version(void) {{ return 7; }}\n"
        f"int {prefix}_set_threads(int n) {{ return n; }}\n"
        "int other(void) { return 3; }\n" + section
    )
    library = folder / f"{prefix}.so"
    run_tool("test", "cc", ["-shared", "-fPIC", hash_style, "-o", str(library), str(source)])
    return library, interface


def test_elf_hash_is_the_system_v_hash() -> None:
    assert elf_hash(b"") == 0
    assert elf_hash(b"printf") == 0x077905A6


def test_a_renamed_library_exports_the_new_names_only(tmp_path: Path) -> None:
    library, interface = _library(tmp_path, "long_old_prefix")
    renamed = rename_library(library, interface, "new", "new.so")
    assert (renamed.prefix, renamed.library) == ("new", "new.so")
    assert read_interface(library) == renamed
    loaded = ctypes.CDLL(str(library))
    assert loaded.new_abi_version() == 7 and loaded.new_set_threads(5) == 5
    assert loaded.other() == 3  # a name that was not renamed is still found
    with pytest.raises(AttributeError):
        _ = loaded.long_old_prefix_abi_version
    # Renamed again, back to a longer name: the slot kept its room.
    again = tmp_path / "again.so"
    again.write_bytes(library.read_bytes())
    rename_library(again, renamed, "long_old_prefix", "l.so")
    assert ctypes.CDLL(str(again)).long_old_prefix_abi_version() == 7


def test_what_cannot_be_renamed_in_place_is_refused(tmp_path: Path) -> None:
    for folder, kwargs, new, expected in (
        ("gnu", {"hash_style": "-Wl,--hash-style=gnu"}, "q", "GNU hash table"),
        ("short", {}, "longer", "no room"),
        ("undescribed", {"described": False}, "q", "no C interface description"),
    ):
        (tmp_path / folder).mkdir()
        library, interface = _library(tmp_path / folder, "pp", **kwargs)  # type: ignore[arg-type]
        before = library.read_bytes()
        with pytest.raises(RenameError, match=expected):
            rename_library(library, interface, new, "x.so")
        assert library.read_bytes() == before, f"{folder}: changed, then refused"
