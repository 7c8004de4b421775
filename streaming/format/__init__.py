"""MDS, JSONL and CSV/TSV shard formats, byte-compatible with mosaicml-streaming 0.13.

The reading API the dataset uses: `load_index`, `ShardInfo`, `open_shard`, `decompress`,
`decompress_file`, `decompress_stream`, `hash_bytes`, `verify_file`; encodings through `get_encoding`.
"""

from .compression import (compress, compress_file, decompress, decompress_file, decompress_stream, is_compression,
                          parse_compression)
from .encodings import Encoding, decode, encode, encoding_names, get_encoding, is_encoding, register_encoding
from .hashing import check_shard_file, hash_algorithms, hash_bytes, hash_file, is_hash, verify_file
from .index import INDEX_BASENAME, ShardFile, ShardInfo, dump_index, load_index, shard_basename
from .reader import MDSShardReader, ShardReader, SplitShardReader, open_shard, refuse_unsafe

__all__ = [
    "INDEX_BASENAME", "Encoding", "check_shard_file", "MDSShardReader", "ShardFile", "ShardInfo", "ShardReader",
    "SplitShardReader", "compress", "compress_file", "decode", "decompress", "decompress_file",
    "decompress_stream",
    "dump_index", "encode", "encoding_names", "get_encoding", "hash_algorithms", "hash_bytes",
    "hash_file", "is_compression", "is_encoding", "is_hash", "load_index", "open_shard",
    "parse_compression", "refuse_unsafe", "register_encoding", "shard_basename", "verify_file",
]
