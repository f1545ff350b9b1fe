"""The embedding model's direct pass against sentence-transformers' own encode: the same vectors,
the same token vectors and spans, whatever the order and lengths of the texts."""

from __future__ import annotations

import numpy as np
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules.pooling import Pooling

from services.retrieval import embedding

MODEL = "all-MiniLM-L6-v2"
# Mixed lengths in no order (a slice of the direct pass holds texts of several lengths, and one
# text runs past the model's 256 tokens), an empty text, spaces around, and characters the
# tokenizer splits or folds.
TEXTS = [
    "The pulsecoder backup battery keeps the encoder's position while the robot is off.",
    "",
    "Osaka",
    "   When it runs low the controller raises SRVO-062; replace the pack within two weeks.   ",
    "İstanbul, Zürich and 東京 are cities.",
    " ".join(f"word{i}" for i in range(400)),
    "yes",
    "Who replaced the pack, and when did the alarm first show on the teach pendant?",
] * 3


def test_the_direct_pass_gives_the_vectors_sentence_transformers_gives() -> None:
    model = embedding.load_model(MODEL)
    assert embedding._reads_directly(model)  # else this test would compare encode with itself
    expected = model.encode(TEXTS, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    found = embedding.encode(MODEL, TEXTS)
    assert found.shape == expected.shape and found.dtype == np.float32
    np.testing.assert_allclose(found, expected, atol=1e-5)


def test_the_direct_pass_keeps_each_token_with_its_characters() -> None:
    model = embedding.load_model(MODEL)
    expected = model.encode(TEXTS, batch_size=64, output_value=None, convert_to_numpy=False)
    for text, read, output in zip(TEXTS, embedding.encode_tokens(MODEL, TEXTS), expected, strict=True):
        tokens = output["token_embeddings"]
        # [CLS] first, [SEP] after the last real token; padding (if any) after that
        real = int(output["attention_mask"].sum()) - 2 if "attention_mask" in output else len(tokens) - 2
        assert len(read.spans) == real
        np.testing.assert_allclose(read.tokens, tokens[1:1 + real].numpy(), atol=1e-4)
        np.testing.assert_allclose(read.vector, output["sentence_embedding"].numpy()
                                   / np.linalg.norm(output["sentence_embedding"].numpy()), atol=1e-5)
        if real:
            start, end = read.spans[0]
            assert text[start:end].strip() and text[start:end].lower() in text.lower()
    long_read = embedding.encode_tokens(MODEL, [TEXTS[5]])[0]
    assert len(long_read.spans) == model.max_seq_length - 2  # cut where encode cuts it


def test_a_model_the_direct_pass_does_not_reproduce_is_left_to_sentence_transformers() -> None:
    model = embedding.load_model(MODEL)
    cls_pooled = SentenceTransformer(modules=[model[0], Pooling(embedding.model_dimension(MODEL), pooling_mode="cls"), model[2]],
                                     device="cpu")
    assert not embedding._reads_directly(cls_pooled)
    no_normalizing = SentenceTransformer(modules=[model[0], model[1]], device="cpu")
    assert not embedding._reads_directly(no_normalizing)
