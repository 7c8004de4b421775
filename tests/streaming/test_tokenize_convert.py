"""`foundry dataset convert --tokenizer --concat-tokens` (issue 13.8): LLM Foundry's
convert_dataset_hf.py --concat_tokens, with a BPE tokenizer the test trains in memory."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from foundry.app.cli.main import main
from foundry.streaming import StreamingDataset

tokenizers = pytest.importorskip("tokenizers")

EOS = "<|endoftext|>"
WORDS = "the quick brown fox jumps over a lazy dog while seven tired owls sing softly near old stone walls".split()


def _docs(n=60):
    rng = np.random.default_rng(7)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 40)))) for _ in range(n)]


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(_docs(200), trainers.BpeTrainer(vocab_size=120, special_tokens=["[UNK]", EOS]))
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path


def _expected(tokenizer_file, docs, n, wrap=True, keep_remainder=False):
    """LLM Foundry's ConcatTokensDataset loop, written out with plain lists."""
    tok = tokenizers.Tokenizer.from_file(str(tokenizer_file))
    eos = tok.encode(EOS, add_special_tokens=False).ids
    out, buffer = [], []
    for doc in docs:
        buffer = buffer + tok.encode(doc).ids + eos
        while len(buffer) >= n:
            out.append(buffer[:n])
            buffer = buffer[n:] if wrap else []
    if keep_remainder and buffer:
        out.append(buffer)
    return out


def foundry(capsys, *args):
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _read(dst):
    ds = StreamingDataset(remote=str(dst), local=str(dst.parent / f"{dst.name}-cache"), batch_size=1)
    return [s["tokens"].tolist() for s in ds]


@pytest.fixture
def corpus(tmp_path):
    docs = _docs()
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"text": d, "id": i}) + "\n" for i, d in enumerate(docs)))
    return path, docs


@pytest.mark.parametrize("flags,wrap,keep", [((), True, False), (("--no-wrap",), False, False),
                                             (("--keep-remainder",), True, True)])
def test_jsonl_is_tokenized_into_concatenated_fixed_length_samples(capsys, tmp_path, tokenizer_file, corpus,
                                                                   flags, wrap, keep):
    src, docs = corpus
    dst = tmp_path / "mds"
    code, out, err = foundry(capsys, "dataset", "convert", str(src), str(dst), "--tokenizer", str(tokenizer_file),
                             "--concat-tokens", "32", "--eos-text", EOS, "--compression", "zstd", *flags, "--json")
    assert code == 0, err
    expected = _expected(tokenizer_file, docs, 32, wrap, keep)
    result = json.loads(out)
    assert result["columns"] == {"tokens": "ndarray:int32"} and result["documents"] == len(docs)
    assert result["samples"] == len(expected) > 10
    assert _read(dst) == expected
    assert all(len(s) == 32 for s in expected[:-1]) and (keep or len(expected[-1]) == 32)


def test_a_folder_of_text_files_is_one_document_per_file(capsys, tmp_path, tokenizer_file):
    docs = _docs(12)
    folder = tmp_path / "texts"
    folder.mkdir()
    for i, d in enumerate(docs):
        (folder / f"doc{i:03d}.txt").write_text(d)
    code, _, err = foundry(capsys, "dataset", "convert", str(folder), str(tmp_path / "mds"),
                           "--tokenizer", str(tokenizer_file.parent), "--concat-tokens", "16", "--eos-text", EOS)
    assert code == 0, err
    assert _read(tmp_path / "mds") == _expected(tokenizer_file, docs, 16)


def test_a_hugging_face_dataset_saved_to_disk(capsys, tmp_path, tokenizer_file):
    datasets = pytest.importorskip("datasets")
    docs = _docs(40)
    saved = tmp_path / "hf"
    datasets.disable_progress_bars()
    try:
        datasets.DatasetDict({"train": datasets.Dataset.from_dict({"content": docs}),
                              "val": datasets.Dataset.from_dict({"content": docs[:5]})}).save_to_disk(str(saved))
    finally:
        datasets.enable_progress_bars()
    args = ["dataset", "convert", str(saved), str(tmp_path / "mds"), "--tokenizer", str(tokenizer_file),
            "--concat-tokens", "24", "--eos-text", EOS, "--text-field", "content"]
    code, _, err = foundry(capsys, *args)
    assert code == 2 and "--split" in err and not (tmp_path / "mds").exists()
    code, _, err = foundry(capsys, *args, "--split", "train")
    assert code == 0, err
    assert _read(tmp_path / "mds") == _expected(tokenizer_file, docs, 24)


def test_bad_input_is_one_line_and_writes_nothing(capsys, tmp_path, tokenizer_file, corpus):
    src, _ = corpus
    dst = tmp_path / "mds"
    for args, code_ in [(("--tokenizer", str(tokenizer_file)), 2), (("--concat-tokens", "8"), 2),
                        (("--tokenizer", str(tmp_path / "nope.json"), "--concat-tokens", "8"), 2),
                        (("--tokenizer", str(src), "--concat-tokens", "8"), 2),
                        (("--tokenizer", str(tokenizer_file), "--concat-tokens", "8", "--text-field", "body"), 2)]:
        code, _, err = foundry(capsys, "dataset", "convert", str(src), str(dst), *args)
        assert code == code_ and err.startswith("error: ") and len(err.strip().splitlines()) <= 2, (args, err)
        assert not dst.exists()


def test_a_bad_line_deep_in_the_corpus_leaves_nothing_behind(capsys, tmp_path, tokenizer_file):
    src = tmp_path / "corpus.jsonl"
    src.write_text("".join(json.dumps({"text": d}) + "\n" for d in _docs(2000)) + "{not json\n")
    code, _, err = foundry(capsys, "dataset", "convert", str(src), str(tmp_path / "mds"), "--tokenizer",
                           str(tokenizer_file), "--concat-tokens", "8", "--size-limit", "1kb")
    assert code == 1 and f"{src}:2001 is not JSON" in err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "foundry-home") == ["corpus.jsonl"]  # + the CLI's own home


@pytest.mark.subprocess
def test_the_cli_keeps_torch_out(tmp_path, tokenizer_file, corpus):
    src, _ = corpus
    code = (
        "import sys; from foundry.app.cli.main import main\n"
        f"try: main(['dataset', 'convert', {str(src)!r}, {str(tmp_path / 'mds')!r}, '--tokenizer', "
        f"{str(tokenizer_file)!r}, '--concat-tokens', '16'])\n"
        "except SystemExit as e: assert not e.code, e.code\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "mds" / "index.json").exists()


MOSAIC_READ = """
import json, sys
from streaming import StreamingDataset
ds = StreamingDataset(local=sys.argv[1], batch_size=1, validate_hash="xxh3_64")
print(json.dumps([ds[i]["tokens"].tolist() for i in range(len(ds))]))
"""


@pytest.mark.slow
def test_mosaic_reads_the_tokenized_dataset_as_llm_foundry_would(mosaic_peer, tmp_path, tokenizer_file, corpus, capsys):
    src, docs = corpus
    assert foundry(capsys, "dataset", "convert", str(src), str(tmp_path / "mds"), "--tokenizer", str(tokenizer_file),
                   "--concat-tokens", "32", "--eos-text", EOS)[0] == 0
    assert json.loads(mosaic_peer(MOSAIC_READ, str(tmp_path / "mds"))) == _expected(tokenizer_file, docs, 32)
