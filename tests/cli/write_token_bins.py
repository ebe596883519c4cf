"""Write token ids in other tools' file layouts, from their documentation only:

llm.c (dev/data/data_common.py, write_datafile): 256 little-endian int32 --
[0] magic 20240520, [1] version 1, [2] token count, the rest 0 -- then the
tokens as uint16. nanoGPT (data/shakespeare/prepare.py): the uint16 array's
bytes, no header.

  write_token_bins.py llmc OUT_PREFIX IDS_FILE SIZES...   shards OUT_PREFIX_000.bin, ... of SIZES tokens
  write_token_bins.py u16 OUT IDS_FILE [FIRST [COUNT]]     tokens [FIRST, FIRST+COUNT) headerless
  write_token_bins.py raw OUT MAGIC VERSION COUNT TOKENS... one llm.c-style file with any header fields

IDS_FILE holds whitespace-separated ids (tfcore tokenizer encode's output).
"""
import sys

import numpy as np


def llmc(path, toks, magic=20240520, version=1, count=None):
    header = np.zeros(256, dtype="<i4")
    header[0], header[1] = magic, version
    header[2] = len(toks) if count is None else count
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(toks, dtype="<u2").tobytes())


def main(argv):
    kind = argv[1]
    if kind == "raw":
        out, magic, version, count = argv[2], int(argv[3]), int(argv[4]), int(argv[5])
        llmc(out, [int(t) for t in argv[6:]], magic, version, count)
        return
    ids = np.array(open(argv[3]).read().split(), dtype=np.int64)
    assert ids.max() < 65536
    if kind == "llmc":
        start = 0
        for i, size in enumerate(int(s) for s in argv[4:]):
            llmc(f"{argv[2]}_{i:03d}.bin", ids[start : start + size])
            start += size
        assert start == len(ids), (start, len(ids))
    elif kind == "u16":
        first = int(argv[4]) if len(argv) > 4 else 0
        count = int(argv[5]) if len(argv) > 5 else len(ids) - first
        ids[first : first + count].astype("<u2").tofile(argv[2])
    else:
        raise SystemExit(f"unknown kind {kind}")


if __name__ == "__main__":
    main(sys.argv)
