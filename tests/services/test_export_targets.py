"""Where an export lands: a FIFO, a device, a symlink or a private file keep being what they
were (the export is written through them, the file keeps its mode), `-o -` is standard output,
and a target that cannot hold a file is refused."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli import app
from services.errors import InputError
from services.review.export_formats import write_export
from tests.security._support import save_runs

RECORDS = [{"run_id": 1, "question": "q"}]  # write_export only serializes; jsonl takes any dicts


def _jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_export_to_a_fifo_writes_into_it_and_leaves_it_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    os.link(fifo, tmp_path / "same-pipe")  # to unblock the reader should the FIFO be replaced
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append((tmp_path / "same-pipe").read_bytes()))
    reader.start()
    try:
        write_export(RECORDS, "jsonl", fifo)
        assert stat.S_ISFIFO(fifo.lstat().st_mode), "the FIFO was replaced by a regular file"
    finally:
        reader.join(5)
        if reader.is_alive():
            # Still blocked opening the FIFO: the export went elsewhere. A non-blocking open for
            # writing lets it through; a blocking one would wait for good should the reader
            # instead have been finishing (is_alive is true until its thread exits).
            try:
                os.close(os.open(tmp_path / "same-pipe", os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass  # no reader waiting after all
            reader.join(10)
    assert received == [b'{"run_id": 1, "question": "q"}\n']


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_export_to_a_character_device_writes_through_it(tmp_path: Path) -> None:
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of our own, never the real one
    write_export(RECORDS, "jsonl", null)
    assert stat.S_ISCHR(null.lstat().st_mode), "the device was replaced by a regular file"


def test_export_to_a_symlink_replaces_the_file_it_names_and_keeps_the_link(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "export.jsonl"
    target.write_text("old\n")
    link = tmp_path / "latest.jsonl"
    link.symlink_to(target)
    write_export(RECORDS, "jsonl", link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert _jsonl(target) == RECORDS


def test_export_over_a_private_file_keeps_its_mode(tmp_path: Path) -> None:
    private = tmp_path / "audit.jsonl"
    private.write_text("old\n")
    private.chmod(0o600)
    write_export(RECORDS, "jsonl", private)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert _jsonl(private) == RECORDS


def test_export_to_a_directory_is_refused_and_it_is_untouched(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "keep.txt").write_text("keep")
    with pytest.raises(InputError, match="is a directory"):
        write_export(RECORDS, "jsonl", folder)
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]


def test_cli_export_to_dash_writes_standard_output(clean_db, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    [run_id] = save_runs(1)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["export", "--format", "jsonl", "-o", "-"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["run_id"] for line in result.stdout.splitlines()] == [run_id]
    assert result.stderr.strip() == "exported 1 records to standard output"
    assert list(tmp_path.iterdir()) == [], "no file named '-'"
