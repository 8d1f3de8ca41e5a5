"""gapbench's own encoding loop for plain Transformer + Pooling [+ Normalize] sentence-transformers models (the
``dense:encoder=fast`` path, and the batching that ``dense:backend=onnx`` shares): texts tokenised once in worker
threads, length-sorted, cut into batches by padded tokens (see :mod:`gapbench.adapters.dense`)."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np


def describe_modules(model) -> str:
    return " + ".join(type(m).__name__ for m in model) or "empty"


def padded(ids: list[list[int]], rows: np.ndarray, pad_id: int, pad_left: bool) -> tuple[np.ndarray, np.ndarray]:
    """The token ids of ``rows`` as one padded batch (as wide as its longest) and its attention mask, padded on the
    side the tokenizer pads."""
    width = max(len(ids[i]) for i in rows)
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for r, i in enumerate(rows):
        n = len(ids[i])
        cols = slice(width - n, width) if pad_left else slice(0, n)
        input_ids[r, cols] = ids[i]
        mask[r, cols] = 1
    return input_ids, mask


class FastEncoder:
    """Encoding of a Transformer + Pooling [+ Normalize] sentence-transformers model without ``encode``'s overheads.

    Texts are tokenised once, in worker threads, without padding; sorted by token count and cut into batches of at
    most ``batch_tokens`` padded tokens; each batch is padded on its own, put in pinned memory and copied on a side
    stream while the previous batch computes; the model's own modules (pooling as configured) run under
    ``torch.inference_mode()`` in the model's dtype, and vectors are normalised on the device. Tokenisation follows
    the model's Transformer module (stripped, lower-cased when it says so, truncated at ``max_seq_length``).
    """

    def __init__(self, model, batch_tokens: int) -> None:
        self.model = model
        self.module = model[0]
        self.tokenizer = model[0].tokenizer
        self.batch_tokens = batch_tokens
        self.pad_id = self.tokenizer.pad_token_id or 0
        self.pad_left = getattr(self.tokenizer, "padding_side", "right") == "left"
        self.with_types = "token_type_ids" in (getattr(self.module, "model_forward_params", None) or ()) and \
            "token_type_ids" in (getattr(self.tokenizer, "model_input_names", None) or ())

    @staticmethod
    def unsupported(model) -> str | None:
        """Why the fast path cannot encode ``model`` exactly as ``encode`` does, or None when it can."""
        try:
            from sentence_transformers.models import Normalize, Pooling, Transformer
        except ImportError:  # pragma: no cover - a sentence-transformers without these modules
            return "this sentence-transformers has no models.Transformer/Pooling/Normalize"
        mods = list(model)
        kinds = [Transformer, Pooling, Normalize][: len(mods)]
        if len(mods) not in (2, 3) or not all(isinstance(m, t) for m, t in zip(mods, kinds)):
            return f"its modules are {describe_modules(model)}"
        cfg = mods[1].get_config_dict()
        mode = cfg.get("pooling_mode")  # sentence-transformers 6 names the mode; 5 sets one flag per mode
        modes = ({mode} if isinstance(mode, str) else set(mode)) if mode is not None else \
            {key[len("pooling_mode_"):] for key, on in cfg.items() if key.startswith("pooling_mode_") and on is True}
        if modes not in ({"mean"}, {"mean_tokens"}, {"cls"}, {"cls_token"}):
            return f"its pooling is {sorted(modes) or cfg}"
        if getattr(model, "default_prompt_name", None) or getattr(model, "truncate_dim", None):
            return "it has a default prompt or a truncated dimension"
        if not getattr(getattr(mods[0], "tokenizer", None), "is_fast", False):
            return f"its tokenizer ({type(getattr(mods[0], 'tokenizer', None)).__name__}) is not a fast tokenizer"
        return None

    @classmethod
    def for_model(cls, model, batch_tokens: int | None = None) -> FastEncoder | None:
        """The fast encoder for ``model``, or None when it is not a plain Transformer + Pooling [+ Normalize] model."""
        if cls.unsupported(model):
            return None
        if batch_tokens is None:
            batch_tokens = 65_536 if model.device.type == "cuda" else 16_384
        return cls(model, batch_tokens)

    def tokenize(self, texts: list[str], workers: int | None = None) -> list[list[int]]:
        """Token ids per text (no padding), tokenised in worker threads (the fast tokenizer releases the GIL)."""
        from concurrent.futures import ThreadPoolExecutor

        lower = getattr(self.module, "do_lower_case", False)
        texts = [t.strip().lower() if lower else t.strip() for t in texts]
        step = max(256, -(-len(texts) // 64))
        pieces = [texts[i : i + step] for i in range(0, len(texts), step)]

        def run(piece: list[str]) -> list[list[int]]:
            enc = self.tokenizer(piece, padding=False, truncation="longest_first",
                                 max_length=self.module.max_seq_length,
                                 return_attention_mask=False, return_token_type_ids=False)
            return enc["input_ids"]

        workers = workers or min(8, os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return [ids for part in pool.map(run, pieces) for ids in part]

    def batches(self, ids: list[list[int]]) -> list[np.ndarray]:
        """Positions of the texts per batch: longest first, each batch within ``batch_tokens`` padded tokens."""
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        order = np.argsort(-lengths, kind="stable")
        out, start = [], 0
        while start < len(order):
            rows = max(1, self.batch_tokens // max(1, int(lengths[order[start]])))
            out.append(order[start : start + rows])
            start += rows
        return out

    def _host_batch(self, ids: list[list[int]], rows: np.ndarray) -> dict:
        import torch

        input_ids, mask = padded(ids, rows, self.pad_id, self.pad_left)
        host = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask)}
        if self.with_types:
            host["token_type_ids"] = torch.zeros_like(host["input_ids"])
        if self.model.device.type == "cuda":
            host = {key: v.pin_memory() for key, v in host.items()}
        return host

    def _upload(self, host: dict, stream) -> dict:
        import torch

        device = self.model.device
        if stream is None:
            return {key: v.to(device) for key, v in host.items()}
        with torch.cuda.stream(stream):
            return {key: v.to(device, non_blocking=True) for key, v in host.items()}

    def encode(self, texts: list[str], *, normalize: bool = True,
               progress: Callable[[int], None] | None = None) -> np.ndarray:
        """float32 vectors of ``texts`` in the given order; ``progress(n)`` after each batch is queued."""
        import torch

        ids = self.tokenize(texts)
        batches = self.batches(ids)
        cuda = self.model.device.type == "cuda"
        stream = torch.cuda.Stream(device=self.model.device) if cuda else None
        outs = []
        with torch.inference_mode():
            pending = self._upload(self._host_batch(ids, batches[0]), stream)
            for b in range(len(batches)):
                features = pending
                if stream is not None:
                    torch.cuda.current_stream().wait_stream(stream)
                    for v in features.values():
                        v.record_stream(torch.cuda.current_stream())
                emb = self.model(features)["sentence_embedding"]  # queued: the next batch is prepared meanwhile
                if normalize:
                    emb = torch.nn.functional.normalize(emb, p=2, dim=1)
                outs.append(emb)
                if progress:
                    progress(len(batches[b]))
                if b + 1 < len(batches):
                    pending = self._upload(self._host_batch(ids, batches[b + 1]), stream)
            flat = torch.cat(outs).float().cpu().numpy()
        out = np.empty_like(flat)
        out[np.concatenate(batches)] = flat
        return out
