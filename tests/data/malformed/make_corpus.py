"""Write the corpus of malformed scored-set files beside this script, and expected.json.

Run from the repository root: ``.venv/bin/python tests/data/malformed/make_corpus.py``.
Every file is small (the largest a few hundred kB) and stands for a way a file can hurt the
machine that reads it (issue 19): compression bombs, members and columns the readers once
crashed on, headers that cost quadratic time, values at the edges of the rules, and seeded
random mutations of valid files. ``expected.json`` says, per file, what a reader must do:

``{"outcome": "refused", "fragment": TEXT}``
    exit 2 / :class:`calibration.ScoredSetError`, the message naming the file and TEXT;
``{"outcome": "read", "n_samples": N, "n_classes": K, "digest": HEX}``
    read, and exactly these rows (the digest covers ids, labels and logits);
``{"outcome": "either"}``
    a random mutation: refused naming the file, or read — never a traceback, a hang or an abort.

FIFOs and links to devices cannot be kept in a repository: tests/test_malformed_inputs.py makes
those at run time.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import struct
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
N, K = 40, 3
# Random mutations of each valid file: bit flips, bytes set to edge values, deletions, insertions.
MUTATIONS_PER_FORMAT = 25


def digest(ids: list[str], labels: np.ndarray, logits: np.ndarray) -> str:
    """What a correct read gives back: ids, labels and float64 logits, hashed."""
    hasher = hashlib.sha256()
    hasher.update("\n".join(ids).encode())
    hasher.update(np.asarray(labels, dtype=np.int64).tobytes())
    hasher.update(np.ascontiguousarray(logits, dtype=np.float64).tobytes())
    return hasher.hexdigest()


def valid_rows(n: int = N, k: int = K, seed: int = 0) -> tuple[list[str], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    logits = np.round(rng.normal(size=(n, k)) + 2.0 * np.eye(k)[labels], 6)
    return [f"row-{i}" for i in range(n)], labels, logits


def read_expectation(ids: list[str], labels: np.ndarray, logits: np.ndarray) -> dict[str, Any]:
    return {"outcome": "read", "n_samples": len(ids), "n_classes": int(logits.shape[1]),
            "digest": digest(ids, labels, logits)}


def refused(fragment: str) -> dict[str, Any]:
    return {"outcome": "refused", "fragment": fragment}


# ------------------------------------------------------------------------------------- npz


def npz_bytes(*, compressed: bool = False, **arrays: Any) -> bytes:
    buffer = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buffer, **arrays)
    return buffer.getvalue()


def patched_member(data: bytes, member: str, *, method: int | None = None, flags: int | None = None,
                   version: int | None = None, file_size: int | None = None) -> bytes:
    """``data`` (a zip) with ``member``'s compression method, flag bits, version needed or
    declared size set in both its local header and its central directory entry."""
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        info = archive.getinfo(member)
    local = info.header_offset
    # The central entry of this member: its signature, then its file name at offset 46.
    central = -1
    start = 0
    while (found := out.find(b"PK\x01\x02", start)) >= 0:
        name_length = struct.unpack_from("<H", out, found + 28)[0]
        if out[found + 46 : found + 46 + name_length] == member.encode():
            central = found
            break
        start = found + 4
    assert central >= 0, member
    # Each field: its offset in the local header, in the central entry, and its format.
    fields = ((version, 4, 6, "<H"), (flags, 6, 8, "<H"), (method, 8, 10, "<H"), (file_size, 22, 24, "<I"))
    for value, in_local, in_central, layout in fields:
        if value is not None:
            struct.pack_into(layout, out, local + in_local, value)
            struct.pack_into(layout, out, central + in_central, value)
    return bytes(out)


def npy_with_header(header: dict[str, Any], data: bytes) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + data


def zip_of(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, content in members.items():
            # A fixed date: the corpus is the same bytes every time it is written.
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), content, compression)
    return buffer.getvalue()


def npz_cases() -> dict[str, tuple[bytes, dict[str, Any]]]:
    ids, labels, logits = valid_rows()
    arrays = {"logits": logits, "labels": labels, "ids": np.array(ids)}
    valid = npz_bytes(**arrays)
    compressed = npz_bytes(compressed=True, **arrays)
    read = read_expectation(ids, labels, logits)
    n_bomb = 4_200_000  # 67 MB of logits and 34 MB of labels, zeros: about 100 kB deflated
    bomb = npz_bytes(compressed=True, logits=np.zeros((n_bomb, 2)), labels=np.zeros(n_bomb, dtype=np.int64))
    npy_labels = io.BytesIO()
    np.save(npy_labels, labels)
    header_bomb = zip_of({"logits.npy": npy_with_header({"descr": "<f8", "fortran_order": False,
                                                         "shape": (10**12, 2)}, bytes(16)),
                          "labels.npy": npy_labels.getvalue()})
    fortran = io.BytesIO()
    np.save(fortran, np.asfortranarray(logits))
    with zipfile.ZipFile(io.BytesIO(valid)) as archive:
        logits_member = archive.read("logits.npy")
    return {
        "npz_valid.npz": (valid, read),
        "npz_valid_deflated.npz": (compressed, read),
        "npz_bzip2.npz": (zip_of({"logits.npy": logits_member, "labels.npy": npy_labels.getvalue(),
                                  "ids.npy": _npy(np.array(ids))}, zipfile.ZIP_BZIP2), read),
        "npz_lzma.npz": (zip_of({"logits.npy": logits_member, "labels.npy": npy_labels.getvalue(),
                                 "ids.npy": _npy(np.array(ids))}, zipfile.ZIP_LZMA), read),
        "npz_zip_bomb.npz": (bomb, refused("compression bomb")),
        "npz_header_bomb.npz": (header_bomb, refused("key 'logits' declares shape (1000000000000, 2)")),
        "npz_method_6.npz": (patched_member(valid, "logits.npy", method=6), refused("compression method 6")),
        "npz_method_99.npz": (patched_member(valid, "logits.npy", method=99), refused("compression method 99")),
        "npz_encrypted.npz": (patched_member(valid, "labels.npy", flags=0x1), refused("'labels.npy' is encrypted")),
        "npz_patched_data.npz": (patched_member(valid, "logits.npy", flags=0x20), refused("logits.npy")),
        "npz_zip_version_99.npz": (patched_member(valid, "logits.npy", version=99), refused("zip file version 9.9")),
        # The header's size, not the zip's, says how much is read: the rows are all there.
        "npz_size_larger_than_data.npz": (patched_member(valid, "labels.npy", file_size=10**8), read),
        "npz_size_smaller_than_data.npz": (patched_member(valid, "labels.npy", file_size=100),
                                           refused("labels")),
        "npz_object_ids.npz": (zip_of({"logits.npy": logits_member, "labels.npy": npy_labels.getvalue(),
                                       "ids.npy": npy_with_header({"descr": "|O", "fortran_order": False,
                                                                   "shape": (N,)}, b"\x80\x04N.")}),
                               refused("holds Python objects")),
        "npz_fortran_logits.npz": (zip_of({"logits.npy": fortran.getvalue(), "labels.npy": npy_labels.getvalue(),
                                           "ids.npy": _npy(np.array(ids))}), read),
        "npz_single_npy.npz": (_npy(logits), refused("not an .npz archive")),
        "npz_truncated.npz": (valid[: len(valid) // 2], refused("cannot be read as .npz")),
        "npz_empty.npz": (b"", refused("cannot be read as .npz")),
        "npz_3d_logits.npz": (npz_bytes(logits=logits.reshape(N, K, 1), labels=labels),
                              refused("must be 2-D")),
        "npz_nan_labels.npz": (npz_bytes(logits=logits, labels=np.where(labels == 1, np.nan, labels)),
                               refused("is not an integer")),
        "npz_long_id.npz": (npz_bytes(compressed=True, logits=logits, labels=labels,
                                      ids=np.array(["x" * 100_000, *ids[1:]])), refused("100,000 characters")),
    }


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


# ------------------------------------------------------------------------------------- csv


def csv_text(ids: list[str], labels: np.ndarray, logits: np.ndarray, *, extra: str = "", extra_header: str = "",
             header: str | None = None) -> bytes:
    columns = header or "id,label," + ",".join(f"logit_{k}" for k in range(logits.shape[1]))
    lines = [columns + extra_header]
    lines += [f"{i},{y}," + ",".join(repr(float(v)) for v in row) + extra for i, y, row in zip(ids, labels, logits)]
    return ("\n".join(lines) + "\n").encode()


def csv_cases() -> dict[str, tuple[bytes, dict[str, Any]]]:
    ids, labels, logits = valid_rows()
    read = read_expectation(ids, labels, logits)
    repeated = 40_000  # 160 kB of header: 30 s of pandas' duplicate-name mangling before the fix
    # The rows stop before the ignored columns: missing trailing fields are empty, never read.
    dup_header = csv_text(ids, labels, logits, extra_header=",x" * repeated)
    long_ids = [f"r{i}" for i in range(10_000)]
    long_ids[5_000] = "y" * 100_000
    rng = np.random.default_rng(1)
    long_labels = rng.integers(0, 2, 10_000)
    long_logits = np.round(rng.normal(size=(10_000, 2)), 3)
    quoted = b'id,"label",logit_0,"logit_\n1"\n'
    # One more column than a table may have at the default max_classes (100,000 logit columns,
    # id, label, group and 100,000 ignored ones): refused by its commas before it is parsed.
    wide = b"id,label,logit_0,logit_1" + b",x" * 200_000 + b"\na,0,1,2\n"
    return {
        "csv_valid.csv": (csv_text(ids, labels, logits), read),
        "csv_bom_crlf.csv": (b"\xef\xbb\xbf" + csv_text(ids, labels, logits).replace(b"\n", b"\r\n"), read),
        "csv_repeated_ignored_header.csv": (dup_header, read),
        "csv_duplicated_label.csv": (csv_text(ids, labels, logits, header="id,label,label,logit_0,logit_1",
                                              extra_header="", extra=""), refused("column 'label' appears 2 times")),
        "csv_duplicated_logit.csv": (csv_text(ids, labels, logits, header="id,label,logit_0,logit_1,logit_1"),
                                     refused("column 'logit_1' appears 2 times")),
        "csv_duplicated_id.csv": (csv_text(ids, labels, logits, header="id,label,id,logit_0,logit_1"),
                                  refused("column 'id' appears 2 times")),
        "csv_logit_index_huge.csv": (b"id,label,logit_0,logit_9999999999999\na,0,1,2\n",
                                     refused("numbered 0 ... K-1 without gaps")),
        "csv_long_id.csv": (csv_text(long_ids, long_labels, long_logits), refused("100,000 characters")),
        "csv_bad_utf8.csv": (b"id,label,logit_0,logit_1\n\xff\xfe,0,1,2\n", refused("cannot be read as CSV")),
        "csv_nul_bytes.csv": (b"id,label,logit_0,logit_1\na\x00b,0,1,2\n",
                              read_expectation(["a\x00b"], np.array([0]), np.array([[1.0, 2.0]]))),
        "csv_unterminated_quote.csv": (b'id,label,logit_0,logit_1\n"a,0,1,2\n', refused("EOF inside string")),
        "csv_header_only.csv": (b"id,label,logit_0,logit_1\n", refused("empty")),
        "csv_header_too_many_columns.csv": (wide, refused("counted by its commas before it is parsed, has 200,004 "
                                                          "columns; at most 200,003 are read")),
        "csv_empty.csv": (b"", refused("empty")),
        "csv_quoted_header.csv": (quoted + b"a,0,1,2\n", refused("is not a valid logit column")),
        "csv_short_row.csv": (b"id,label,logit_0,logit_1\na,0,1\n", refused("row 0")),
        "csv_inf_logit.csv": (b"id,label,logit_0,logit_1\na,0,inf,2\n", refused("is not finite")),
        "csv_label_text.csv": (b"id,label,logit_0,logit_1\na,zero,1,2\n", refused("is not an integer")),
    }


# --------------------------------------------------------------------------------- parquet


def parquet_bytes(table: pa.Table, **options: Any) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, **options)
    return buffer.getvalue()


def valid_table(ids: list[str], labels: np.ndarray, logits: np.ndarray) -> pa.Table:
    columns: dict[str, Any] = {"id": pa.array(ids), "label": pa.array(labels.astype(np.int64))}
    columns.update({f"logit_{k}": pa.array(logits[:, k]) for k in range(logits.shape[1])})
    return pa.table(columns)


def parquet_cases() -> dict[str, tuple[bytes, dict[str, Any]]]:
    ids, labels, logits = valid_rows()
    read = read_expectation(ids, labels, logits)
    table = valid_table(ids, labels, logits)
    n_bomb = 3_000_000  # one repeated row: 120 MB in memory from about 150 kB on disk
    one = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n_bomb, dtype=np.int32)), pa.array(["same"]))
    zeros = pa.array(np.zeros(n_bomb))
    bomb = pa.table({"id": one, "label": pa.array(np.zeros(n_bomb, dtype=np.int64)), "logit_0": zeros,
                     "logit_1": zeros})
    duplicated = pa.Table.from_arrays([table["id"], table["label"], table["label"], *table.columns[2:]],
                                      names=["id", "label", "label", *table.column_names[2:]])
    ignored_twice = pa.Table.from_arrays([*table.columns, pa.array(range(N)), pa.array(range(N))],
                                         names=[*table.column_names, "x", "x"])
    bad_utf8 = table.set_column(0, "id", pa.Array.from_buffers(
        pa.string(), N, [None, pa.py_buffer(np.arange(N + 1, dtype=np.int32).tobytes()),
                         pa.py_buffer(b"\xff" * N)]))
    metadata = table.replace_schema_metadata({b"pandas": b'{"columns": [{"name": "id"}], "index_columns": []}'})
    nulls = table.set_column(1, "label", pa.array([None, *labels[1:].tolist()], pa.int64()))
    many_groups = parquet_bytes(table, row_group_size=4)
    valid = parquet_bytes(table)
    return {
        "parquet_valid.parquet": (valid, read),
        "parquet_row_groups_of_4.parquet": (many_groups, read),
        "parquet_dictionary_ids.parquet": (parquet_bytes(table, use_dictionary=True), read),
        "parquet_float32_logits.parquet": (
            parquet_bytes(pa.table({"id": ids, "label": labels, **{f"logit_{k}": pa.array(
                logits[:, k].astype(np.float32)) for k in range(K)}})),
            read_expectation(ids, labels, logits.astype(np.float32).astype(np.float64))),
        "parquet_bomb.parquet": (parquet_bytes(bomb, compression="zstd", row_group_size=n_bomb),
                                 refused("compression bomb")),
        "parquet_duplicated_label.parquet": (parquet_bytes(duplicated), refused("column 'label' appears 2 times")),
        "parquet_ignored_column_twice.parquet": (parquet_bytes(ignored_twice), read),
        "parquet_invalid_utf8_id.parquet": (parquet_bytes(bad_utf8), refused("not valid UTF-8")),
        "parquet_corrupt_pandas_metadata.parquet": (parquet_bytes(metadata), read),
        "parquet_null_label.parquet": (parquet_bytes(nulls), refused("row 0")),
        "parquet_long_id.parquet": (parquet_bytes(table.set_column(0, "id", pa.array(["z" * 2_000, *ids[1:]]))),
                                    refused("the id is 2,000 characters long")),
        "parquet_truncated.parquet": (valid[: len(valid) - 100], refused("cannot be read as Parquet")),
        "parquet_no_magic.parquet": (b"PAR1" + bytes(100), refused("cannot be read as Parquet")),
        "parquet_empty.parquet": (b"", refused("cannot be read as Parquet")),
    }


# --------------------------------------------------------------------------------- mutations


def mutated(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 4, 8])):
        # Half the edits near the end, where zip central directories and Parquet footers live.
        pos = rng.randrange(len(out)) if rng.random() < 0.5 else rng.randrange(max(0, len(out) - 400), len(out))
        op = rng.random()
        if op < 0.5:
            out[pos] ^= 1 << rng.randrange(8)
        elif op < 0.7:
            out[pos] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        elif op < 0.8:
            out[pos : pos + 4] = rng.choice([b"\xff\xff\xff\x7f", b"\x00\x00\x00\x80", b"\xff\xff\xff\xff"])
        elif op < 0.9:
            del out[pos : pos + rng.randrange(1, 50)]
        else:
            out[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 20)))
    return bytes(out)


def mutation_cases(bases: dict[str, bytes]) -> dict[str, tuple[bytes, dict[str, Any]]]:
    rng = random.Random(19)
    cases = {}
    for name, data in bases.items():
        stem, suffix = name.rsplit(".", 1)
        for number in range(MUTATIONS_PER_FORMAT):
            cases[f"mutated_{stem}_{number:02d}.{suffix}"] = (mutated(data, rng), {"outcome": "either"})
    return cases


def main() -> int:
    builders: list[Callable[[], dict[str, tuple[bytes, dict[str, Any]]]]] = [npz_cases, csv_cases, parquet_cases]
    cases: dict[str, tuple[bytes, dict[str, Any]]] = {}
    for build in builders:
        cases.update(build())
    bases = {name: cases[name][0] for name in ("npz_valid.npz", "npz_valid_deflated.npz", "csv_valid.csv",
                                               "parquet_valid.parquet", "parquet_row_groups_of_4.parquet")}
    cases.update(mutation_cases(bases))
    for old in HERE.iterdir():
        if old.suffix in (".npz", ".csv", ".parquet"):
            old.unlink()
    for name, (data, _) in cases.items():
        (HERE / name).write_bytes(data)
    expected = {name: expectation for name, (_, expectation) in sorted(cases.items())}
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"wrote {len(cases)} files ({sum(len(data) for data, _ in cases.values()):,} bytes) to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
