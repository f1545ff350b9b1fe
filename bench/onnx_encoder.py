"""The packaged embedding model on ONNX Runtime against PyTorch (issue 32, item 3): do the
vectors match, and is it faster?

    pip install onnx onnxruntime ml_dtypes        # not dependencies of the workbench
    python bench/onnx_encoder.py [--texts 600] [--threads 1,2]

sentence-transformers' own ONNX backend (`backend="onnx"`) goes through optimum, whose
exporter does not import with the transformers this project pins (optimum 2.3.0 against
transformers 5.x: `get_parameter_dtype` is gone), so this exports the same model with
`torch.onnx.export` and runs it with onnxruntime: the same tokenizer, the same mean pooling
and normalisation as services.retrieval.embedding. Texts are SQuAD 2.0 half-dev paragraphs and
questions (read from ../shared, never committed), half each.

The export is run twice: as exported, and through onnxruntime's transformer optimiser (fused
attention, layer norm, GELU), which is what an ONNX deployment of a BERT-type model runs.
Per thread count, each backend encodes every text in batches of 64 (length-sorted, as
sentence-transformers does), three times; the best of three is kept, in wall and CPU time.
Prints one JSON line: texts/s and CPU ms a text per backend and thread count, the speed-up,
and the largest absolute difference of any vector component (the issue's bar: 1e-4).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import emit, log, machine, rounded, squad_paragraphs, squad_questions, today  # noqa: E402

BATCH = 64


def _texts(count: int) -> list[str]:
    paragraphs = [p["text"] for p in squad_paragraphs()][: count // 2]
    questions = [q["text"] for q in squad_questions()][: count - len(paragraphs)]
    return paragraphs + questions


def _export(model: Any, path: Path) -> None:
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    sample = model.tokenizer(["an example", "a slightly longer example text"], padding=True, return_tensors="pt")
    axes = {"b": 0, "s": 1}
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(LastHiddenState(model[0].auto_model.eval()),
                      tuple(sample[name] for name in names), str(path), input_names=names,
                      output_names=["last_hidden_state"],
                      dynamic_axes={name: {i: a for a, i in axes.items()} for name in [*names, "last_hidden_state"]},
                      opset_version=17, dynamo=False)


def _ort_encode(session: Any, tokenizer: Any, texts: list[str], max_length: int) -> Any:
    import numpy as np

    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    out = np.zeros((len(texts), 384), dtype=np.float32)
    for start in range(0, len(order), BATCH):
        index = order[start:start + BATCH]
        batch = tokenizer([texts[i] for i in index], padding=True, truncation=True, max_length=max_length,
                          return_tensors="np")
        feeds = {name: batch[name].astype(np.int64) for name in ("input_ids", "attention_mask", "token_type_ids")}
        hidden = session.run(None, feeds)[0]
        mask = feeds["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        out[index] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return out


def _best_of_three(encode: Any) -> tuple[Any, float, float]:
    best_wall = best_cpu = float("inf")
    vectors = None
    for _ in range(3):
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = encode()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return vectors, best_wall, best_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=600)
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    try:
        import onnxruntime as ort
    except ImportError:
        raise SystemExit("onnxruntime is not installed: pip install onnx onnxruntime ml_dtypes") from None
    import numpy as np
    import torch

    from services.retrieval.embedding import load_model
    from services.settings import get_settings

    texts = _texts(args.texts)
    model = load_model(get_settings().embedding_model)
    max_length = model.max_seq_length
    result: dict[str, Any] = {"texts": len(texts), "max_seq_length": max_length, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        path, fused = Path(tmp) / "minilm.onnx", Path(tmp) / "minilm-fused.onnx"
        _export(model, path)
        # onnxruntime's transformer optimiser fuses attention, layer norm and GELU into single
        # kernels: what an ONNX deployment of a BERT-type model would run.
        from onnxruntime.transformers import optimizer

        optimizer.optimize_model(str(path), model_type="bert", num_heads=12, hidden_size=384).save_model_to_file(str(fused))
        for threads in [int(t) for t in args.threads.split(",")]:
            torch.set_num_threads(threads)
            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
            load = os.getloadavg()[0]
            reference, torch_wall, torch_cpu = _best_of_three(
                lambda: model.encode(texts, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True))
            run: dict[str, Any] = {"torch_texts_per_s": rounded(len(texts) / torch_wall, 1),
                                   "torch_cpu_ms_per_text": rounded(1000 * torch_cpu / len(texts), 2)}
            for name, graph in (("onnx", path), ("onnx_fused", fused)):
                session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
                vectors, wall, cpu = _best_of_three(
                    lambda session=session: _ort_encode(session, model.tokenizer, texts, max_length))
                run.update({f"{name}_texts_per_s": rounded(len(texts) / wall, 1),
                            f"{name}_cpu_ms_per_text": rounded(1000 * cpu / len(texts), 2),
                            f"{name}_speedup_wall": rounded(torch_wall / wall, 2),
                            f"{name}_speedup_cpu": rounded(torch_cpu / cpu, 2),
                            f"{name}_max_abs_diff": float(np.abs(reference - vectors).max())})
            run["load_average_1min"] = rounded(load, 1)
            result["runs"][str(threads)] = run
            log(f"{threads} thread(s): {result['runs'][str(threads)]}")
    result.update({"onnxruntime": ort.__version__, "torch": torch.__version__, "machine": machine(), "date": today()})
    emit(result)


if __name__ == "__main__":
    main()
